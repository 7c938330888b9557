#!/usr/bin/env bash
# The long fuzz run of 2026-12-01: every target under libFuzzer's fork mode (crashes, timeouts and
# OOMs are saved and the run goes on), niced, two targets at a time (the 2-core machine was shared
# with other builds). Raw logs, found inputs and the per-target plan land in OUT; summarize.py
# writes summary.json and results.md from them.
# Usage (from the repo root, after `make fuzz`):
#   bench/results/2026-12-01-fuzz/run_long.sh OUT
# Plan (seconds per target): PLAN="gguf:1200 safetensors:1200 ..." overrides the default below.
set -uo pipefail
OUT="${1:?usage: run_long.sh OUT}"
BUILD="${BUILD:-build-fuzz}"
PLAN="${PLAN:-gguf:1200 safetensors:1200 gguf_tokenizer:900 chat_template:900 tokenizer_json:900 session_file:900}"
PARALLEL="${PARALLEL:-2}"
mkdir -p "$OUT/bin" "$OUT/logs" "$OUT/corpus" "$OUT/artifacts"
git rev-parse HEAD > "$OUT/commit.txt"
git status --short --untracked-files=no > "$OUT/dirty.txt"
# Private copies of the binaries: fork mode starts new processes from the executable, and the
# build may be rebuilt while this runs.
for e in "$BUILD"/fuzz/fuzz_*; do cp "$e" "$OUT/bin/"; done
echo "$PLAN" > "$OUT/plan.txt"
run_one() {
  local t="${1%%:*}" secs="${1##*:}"
  mkdir -p "$OUT/corpus/$t" "$OUT/artifacts/$t"
  cp -n "$BUILD/corpus/$t"/* "$OUT/corpus/$t/" 2>/dev/null
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  nice -n 10 "$OUT/bin/fuzz_$t" "$OUT/corpus/$t" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
    -artifact_prefix="$OUT/artifacts/$t/" -print_final_stats=1 > "$OUT/logs/$t.log" 2>&1
  echo "$t exit $? after $secs s" >> "$OUT/logs/exit.txt"
}
running=0
for item in $PLAN; do
  if [ "$running" -ge "$PARALLEL" ]; then wait -n; running=$((running - 1)); fi
  run_one "$item" &
  running=$((running + 1))
done
wait
echo "done $(date -u +%FT%TZ)" >> "$OUT/logs/exit.txt"
