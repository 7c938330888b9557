#!/usr/bin/env bash
# Issue 3 on the H200 (after bench/results/2026-11-29-h200/session2/peers_vulkan/recipe.sh a/b, or any stage that put the binaries in
# /root/wg/bin): the trained-hybrid parity tests (both layouts, both backends) and the chunked-
# prefill check on the trained Qwen3.5: TTFT of a 512-token prompt vs 64 decode steps, with the
# state sizes (bench JSON memory_bytes). Needs .carry/bin/{wgllm,trained_hybrids_test,...} staged
# into /root/wg/bin. MODE=tests: only the tests (they may overlap a background build: correctness
# only); MODE=bench: only the timings (run when nothing else runs); default: both.
set -u
W=/root/wg
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$W/bin XDG_RUNTIME_DIR=/tmp
export WGLLM_CACHE=$W WGLLM_SOURCE_DIR=$PWD
R=$OUT/hybrids; mkdir -p $R
MODE=${MODE:-all}
if [ $MODE != bench ]; then
  for t in trained_hybrids_test qwen35_parity_test lfm2_parity_test; do
    [ -x $W/bin/$t ] && $W/bin/$t 2>&1 | grep -E "cpu-ref|gpu-cpu|perplexity|prefill\(T\)|PASSED|FAILED" | tail -30 | tee $R/$t.txt
  done
fi
if [ $MODE != tests ]; then
  for m in tests/fixtures/qwen35_trained/hf tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf \
           tests/fixtures/lfm2_trained/hf tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf; do
    n=$(basename $(dirname $m))_$(basename $m | sed 's/\..*//')
    $W/bin/wgllm bench -m $m --prompt-lengths 512 --gen 64 --reps 5 --allow-busy --json $R/$n.json 2>&1 | grep "^| product"
  done
  python3 - $R <<'PY'
import json, glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*_trained_*.json"))):
    d = json.load(open(f)); r = d["runs"][0]
    steps64 = 64 * 1000.0 / r["decode_tok_s_median"]
    print(f"{os.path.basename(f)}: prefill 512 (TTFT) {r['ttft_ms_median']:.2f} ms vs 64 decode steps {steps64:.2f} ms "
          f"(p50 step {r['decode_latency_ms_p50']:.3f} ms) -> {'OK' if r['ttft_ms_median'] < steps64 else 'NOT MET'}; "
          f"state bytes {d['memory_bytes']}")
PY
fi
