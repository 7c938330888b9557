#!/usr/bin/env bash
# Fuzzes each target for a fixed time with libFuzzer and prints one line per target (executions,
# exec/s, coverage, corpus, result). Exits 1 when any target found a crash, a leak, a timeout (one
# input running > FUZZ_TIMEOUT s) or an out-of-memory (> FUZZ_RSS_MB), printing its report (the
# sanitizer's stack trace) and the saved input (BUILD/fuzz-artifacts/<target>/).
# Usage: fuzz/run.sh BUILD SECONDS [TARGET...]   (BUILD made by `make fuzz`; default: all targets)
# Environment: FUZZ_PARALLEL (targets at a time, default nproc), FUZZ_TIMEOUT (s per input, 25),
#   FUZZ_RSS_MB (2048), FUZZ_SEED (1).
#   e.g. fuzz/run.sh build-fuzz 20                 (what `make fuzz-ci` runs)
#        fuzz/run.sh build-fuzz 300 chat_template
set -uo pipefail
BUILD="${1:?usage: fuzz/run.sh BUILD SECONDS [TARGET...]}"
SECONDS_EACH="${2:?usage: fuzz/run.sh BUILD SECONDS [TARGET...]}"
shift 2
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(gguf safetensors tokenizer_json gguf_tokenizer chat_template session_file)
FUZZ_TIMEOUT="${FUZZ_TIMEOUT:-25}"
FUZZ_RSS_MB="${FUZZ_RSS_MB:-2048}"
# Fixed random seed: with the same seed corpus (make fuzz rewrites it) every run tries the same
# inputs in the same order, so a CI result does not depend on luck, only on how far it got.
FUZZ_SEED="${FUZZ_SEED:-1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

FUZZ_PARALLEL="${FUZZ_PARALLEL:-$(nproc)}"   # targets fuzzed at the same time (one process each)

# fuzz_one TARGET: runs it; its result line goes to BUILD/fuzz-logs/TARGET.row.
fuzz_one() {
  local t="$1" exe="$BUILD/fuzz/fuzz_$1" art="$BUILD/fuzz-artifacts/$1/" log="$BUILD/fuzz-logs/$1.log"
  mkdir -p "$art" "$BUILD/fuzz-logs" "$BUILD/corpus/$t"
  "$exe" "$BUILD/corpus/$t" -max_total_time="$SECONDS_EACH" -timeout="$FUZZ_TIMEOUT" \
    -rss_limit_mb="$FUZZ_RSS_MB" -malloc_limit_mb="$FUZZ_RSS_MB" -artifact_prefix="$art" \
    -seed="$FUZZ_SEED" -print_final_stats=1 >"$log" 2>&1
  local rc=$? execs eps last cov ft corp result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FAILED (exit $rc): $(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY:' "$log" | head -c 200)"
  fi
  printf '%-15s %10s execs %8s exec/s  cov %6s  ft %6s  corpus %5s  %s\n' "$t" "${execs:-?}" "${eps:-?}" \
    "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" | tee "$BUILD/fuzz-logs/$t.row"
}

for t in "${TARGETS[@]}"; do
  [ -x "$BUILD/fuzz/fuzz_$t" ] || { echo "fuzz: $BUILD/fuzz/fuzz_$t missing (run make fuzz)" >&2; exit 2; }
  rm -f "$BUILD/fuzz-logs/$t.row"
done
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "$FUZZ_PARALLEL" ]; then wait -n; running=$((running - 1)); fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
failed=()
for t in "${TARGETS[@]}"; do grep -q '  ok$' "$BUILD/fuzz-logs/$t.row" 2>/dev/null || failed+=("$t"); done
echo "---- fuzz summary (${SECONDS_EACH} s per target, $FUZZ_PARALLEL at a time; logs in $BUILD/fuzz-logs) ----"
for t in "${TARGETS[@]}"; do cat "$BUILD/fuzz-logs/$t.row" 2>/dev/null || echo "$t: no result"; done
for t in "${failed[@]}"; do
  echo "==== $t: report ($BUILD/fuzz-logs/$t.log) ===="
  grep -v -E '^#[0-9]+|^INFO:' "$BUILD/fuzz-logs/$t.log" | tail -n 60
  echo "saved inputs: $(ls "$BUILD/fuzz-artifacts/$t/" 2>/dev/null | tr '\n' ' ')"
done
[ ${#failed[@]} -eq 0 ] || { echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2; exit 1; }
echo "fuzz: all ${#TARGETS[@]} targets ran ${SECONDS_EACH} s without a crash, leak, timeout or OOM"
