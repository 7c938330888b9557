#!/usr/bin/env bash
# Final multi-turn round (after bench/results/2026-11-29-h200/session2/recipe_multiturn.sh a and b staged the binaries and the first two
# model parts in /root/wg): SmolLM2 30 turns x3 with the product configuration, once with
# --no-attn-tiled, and the trained Qwen3.5 / LFM2 (snapshot cost of recurrent state). Carry
# .carry/model_part02 and .gl. Results: $OUT/mt.tgz.
set -u
W=/root/wg
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
cat $W/model_part00 $W/model_part01 .carry/model_part02 > $W/models/SmolLM2-135M-Instruct.Q4_1.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $W/models/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$W/bin XDG_RUNTIME_DIR=/tmp WGLLM_CACHE=$W
R=$OUT/mt; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv > $R/gpu.txt
B=$W/bin/wgllm
MT="bench multi-turn --turns 30 --turn-tokens 32 --reply-tokens 16"
for i in 1 2 3; do $B $MT --json $R/multiturn_30_tiled_$i.json > $R/log_tiled_$i.txt 2>&1; done
$B $MT --no-attn-tiled --json $R/multiturn_30_untiled_1.json > $R/log_untiled_1.txt 2>&1
$B $MT -m tests/fixtures/qwen35_trained/hf --context 2048 --json $R/multiturn_30_qwen35_trained.json > $R/log_qwen35.txt 2>&1
$B $MT -m tests/fixtures/lfm2_trained/hf --context 2048 --json $R/multiturn_30_lfm2_trained.json > $R/log_lfm2.txt 2>&1
python3 - $R <<'PY'
import json, sys, os, statistics as st, glob
for f in sorted(glob.glob(os.path.join(sys.argv[1], "multiturn_30_*.json"))):
    d = json.load(open(f)); t = d["turns"]
    s = [x["ttft_session_ms"] for x in t]; r = [x["ttft_recompute_ms"] for x in t]
    su = [x.get("snapshot_us", 0) for x in t]; sb = [x.get("snapshot_bytes", 0) for x in t]
    print(f"{os.path.basename(f)}: turns {len(s)}, turn2 {s[1]:.2f} ms, last {s[-1]:.2f} ms, ratio {s[-1]/s[1]:.3f} | "
          f"median(2-4) {st.median(s[1:4]):.2f}, median(last 3) {st.median(s[-3:]):.2f}, ratio {st.median(s[-3:])/st.median(s[1:4]):.3f} | "
          f"recompute {r[1]:.1f} -> {r[-1]:.1f} ms | snapshot median {st.median(su):.1f} us, max {max(su):.1f} us, "
          f"live bytes at the end {sb[-1]} | first-token mismatches {d['first_token_mismatches']}")
PY
python3 tools/plots/plot_multiturn.py $R/multiturn_30_tiled_1.json $R/multiturn_30_tiled_1.png $R/multiturn_30_untiled_1.json 2>&1 | tail -1
tail -3 $R/log_qwen35.txt
cd $OUT && tar czf mt.tgz mt && rm -rf mt
