#!/usr/bin/env bash
# Issue 4, flat multi-turn TTFT: measures --attn-tiled (multi-query tiled attention for T > 1) on
# the H200 device machine, in calls that keep the machine warm (same staging as
# bench/results/2026-11-29-h200/round2/recipe.sh; the model travels in three parts made with
# `split -b 33000000 -d MODEL .carry/model_part`):
#   a: carry .carry/bin .carry/model_part00 .gl -> stores them in /root/wg, unpacks the Vulkan loader
#   b: carry .carry/model_part01                -> stores it
#   c: carry .carry/model_part02                -> joins the model; SmolLM2 parity test; `wgllm bench
#      attention` (the op alone, timestamps); 30-turn multi-turn bench with the flag on and off,
#      twice each, interleaved (on, off, on, off); summary.txt; PNG when matplotlib is there
#   d: (nothing carried)                        -> A/B controls (A = --no-attn-tiled, B = default):
#      TTFT at prompt 512 + decode tok/s, TTFT at prompt 4096; multi-turn with the tiled kernel but
#      no key split; per-kernel profile of a turn-30 forward, tiled and not
# Results in $OUT/mt (each call returns its own files).
set -u
stage=$1
W=/root/wg
mkdir -p $W/models $W/bin
unpack() { if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig; fi; }
case $stage in
a) cp .carry/model_part00 $W/; cp -r .carry/bin/* $W/bin/; unpack; exit 0 ;;
b) cp .carry/model_part01 $W/; [ -d .carry/bin ] && cp -r .carry/bin/* $W/bin/; exit 0 ;;
esac
unpack
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$W/bin XDG_RUNTIME_DIR=/tmp
export WGLLM_CACHE=$W WGLLM_SOURCE_DIR=$PWD
GGUF=$W/models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -f $GGUF ] || cat $W/model_part00 $W/model_part01 .carry/model_part02 > $GGUF
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $GGUF" | sha256sum -c || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
R=$OUT/mt; mkdir -p $R
B=$W/bin/wgllm
MT="bench multi-turn --turns 30 --turn-tokens 32 --reply-tokens 16"
if [ "$stage" = c ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
  [ -x $W/bin/smollm2_parity_test ] && $W/bin/smollm2_parity_test 2>&1 | grep -E "cpu-ref|OK|FAIL|PASSED" | tail -8
  # The attention op alone: per-row vs tiled, split on/off, tiled split targets; the turn shape
  # (44 new tokens over 1700 cached) and prefill chunks (512 tokens at positions 0 and 3584).
  $B bench attention --reps 20 --split-targets 128,256,512,1024,2048 --json $R/attention_t44_c1700.json 2>&1 | tail -9
  $B bench attention --reps 20 --cache 120 --split-targets 512 --json $R/attention_t44_c120.json 2>&1 | tail -5
  $B bench attention --reps 10 --tokens 512 --cache 0 --split-targets 512,2048 --json $R/attention_t512_c0.json 2>&1 | tail -6
  $B bench attention --reps 10 --tokens 512 --cache 3584 --split-targets 512,2048 --json $R/attention_t512_c3584.json 2>&1 | tail -6
  $B $MT --json $R/multiturn_30_tiled.json 2>&1 | tail -3
  $B $MT --no-attn-tiled --json $R/multiturn_30_untiled.json 2>&1 | tail -3
  $B $MT --json $R/multiturn_30_tiled_rep2.json 2>&1 | tail -1
  $B $MT --no-attn-tiled --json $R/multiturn_30_untiled_rep2.json 2>&1 | tail -1
  python3 - "$R" > $R/summary.txt <<'PY'
import json, sys, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "multiturn_30*.json"))):
    j = json.load(open(f))
    t = j["turns"]
    s = {x["turn"]: x["ttft_session_ms"] for x in t}
    h = [x.get("host_ms", 0) for x in t]
    print(f"{os.path.basename(f)}: turn2 {s[2]:.2f} ms, turn30 {s[30]:.2f} ms, ratio {s[30]/s[2]:.3f}; "
          f"host_ms turn2 {h[1]:.2f} turn30 {h[29]:.2f}; first-token mismatches {j['first_token_mismatches']}")
PY
  cat $R/summary.txt
  if python3 -c "import matplotlib" 2>/dev/null; then
    python3 tools/plots/plot_multiturn.py $R/multiturn_30_tiled.json $R/multiturn_30_tiled_vs_untiled.png $R/multiturn_30_untiled.json
    python3 tools/plots/plot_multiturn.py $R/multiturn_30_tiled.json $R/multiturn_30_tiled.png
  else
    echo "no matplotlib: plot locally: python3 tools/plots/plot_multiturn.py multiturn_30_tiled.json out.png multiturn_30_untiled.json"
  fi
  exit 0
fi
# stage d: controls. Prefill 512 (T > 1: the tiled kernel runs) and decode (T = 1: must not move).
$B bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1 --no-attn-tiled" --b "bench --prompt-lengths 512 --gen 128 --reps 1" \
  --metric ttft_ms,decode_tok_s --rounds 3 --json $R/ab_attn_tiled_p512_g128.json 2>&1 | tail -3
$B bench ab --a "bench --prompt-lengths 4096 --gen 16 --reps 1 --no-attn-tiled" --b "bench --prompt-lengths 4096 --gen 16 --reps 1" \
  --metric ttft_ms --rounds 3 --json $R/ab_attn_tiled_p4096.json 2>&1 | tail -3
# Tiled kernel without its key split (--no-attn-split also turns off decode's split: TTFT only).
$B $MT --no-attn-split --json $R/multiturn_30_tiled_nosplit.json 2>&1 | tail -1
# Per-kernel GPU time of one turn-30 prefill forward (the last turn's new tokens over the cache
# before them), tiled and not: the JSON's profile_last_turn_forward (timestamps add overhead).
$B $MT --profile --json $R/profile_tiled.json 2>&1 | grep -A60 "^profile:" | grep -E "profile:|attention"
$B $MT --profile --no-attn-tiled --json $R/profile_untiled.json 2>&1 | grep -A60 "^profile:" | grep -E "profile:|attention"
