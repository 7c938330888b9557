#!/usr/bin/env bash
# The long fuzz run on the device machine's CPU cores (the fuzz targets need no GPU): every target
# of `make fuzz` in libFuzzer's fork mode with one job per core but two (crashes, timeouts and OOMs
# are saved and the run goes on), one target after another, SECS seconds each (default 40).
# Staging: make fuzz; python3 tools/device/pack.py --bin --extra build-fuzz/fuzz=fuzzbin \
#            build-fuzz/corpus=fuzzcorpus ...   (the binaries need libutf8proc/libfmt: pack them
#            with --bin wgllm, which copies them, or in the same plan as the speed recipe)
# Results in $OUT/fuzz.tgz: logs/<target>.log, plan.txt, commit.txt, artifacts/ (summarize with
# bench/results/2026-12-01-fuzz/summarize.py).
set -u
source tools/device/remote.sh
R=$W/fuzzrun; rm -rf $R; mkdir -p $R/logs $R/artifacts $R/corpus
trap 'tar czf $OUT/fuzz.tgz -C $R logs plan.txt commit.txt artifacts' EXIT
J=$(( $(nproc) - 2 )); SECS=${SECS:-40}
cp -r .carry/fuzzbin $W/ 2>/dev/null; cp -r .carry/fuzzcorpus/. $R/corpus/ 2>/dev/null
echo "${COMMIT:-unknown}" > $R/commit.txt  # the caller passes COMMIT (the device copy has no .git)
plan=""
for b in $W/fuzzbin/fuzz_*; do
  t=${b##*/fuzz_}; [[ $t == *.* ]] && continue
  plan="$plan $t:$SECS"
  mkdir -p $R/corpus/$t $R/artifacts/$t
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  $b $R/corpus/$t -fork=$J -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -max_total_time=$SECS -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 -artifact_prefix=$R/artifacts/$t/ -print_final_stats=1 > $R/logs/$t.log 2>&1
  echo "$t: exit $? $(grep -E '^#[0-9]+: cov' $R/logs/$t.log | tail -1)"
done
echo $plan > $R/plan.txt
echo "jobs per target: $J on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2))"
