#!/usr/bin/env bash
# Issue 13 on the device GPU: the two real GGUFs no one here trained, Qwen2.5-Coder-1.5B-Instruct Q4_K_M
# (1.1 GB, `wgllm pull qwen2.5-coder-1.5b`) and gemma-3-270m Q4_K_M, carried in slices, in the product
# configuration (the hardware GPU's defaults: tiled int8 prefill, flash attention, subgroup matvec).
# For each model that has arrived:
#   - `wgllm run`, greedy: a question with the chat template (gemma-3-270m, a base model: the text continued)
#   - `wgllm chat`, greedy, two user turns from stdin (the second refers to the first)
#   - `wgllm perplexity` by llama-perplexity's method on the slice the agreement test uses (Moby-Dick
#     bytes 20000..32000, n_ctx 512, 2 chunks): tools/device/recipes/real_models_summary.py compares
#     it with llama-perplexity's values on the same file and slice (llama.cpp's CPU backend, 2026-12-06/07:
#     tests/e2e/llamacpp_agreement_test.cpp's header), bound 0.5%
#   - `wgllm perplexity` over the whole of Moby-Dick at n_ctx 512 (PPL_ALL=1, default): the time it takes
#     (issue 13: a 300k-token corpus on the device)
# Staging (here, repo root, after `make build`):
#   tools/device/lean_tree.sh on     # the tree without results / fixtures: ~60 MiB of slices a call
#   mkdir -p /tmp/synth && python3 tools/synth/gguf_header.py ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/synth/smollm2.hdr.gz
#   python3 tools/synth/gguf_header.py ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf /tmp/synth/qwen25-coder-1.5b.hdr.gz
#   tools/peers/build_llamacpp_vulkan.sh     # optional: the Vulkan peer for STAGE=peers (.carry/llama-vk.tar.xz.partNN)
#   python3 tools/device/pack.py --lean --bin wgllm --gl --llamacpp --model ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
#     ~/.cache/wgllm/models/gemma-3-270m-q4_k_m.gguf --extra ~/.cache/wgllm/text/package/moby-dick/data/data.txt=moby.txt /tmp/synth=synth
#   (with the Vulkan peer: add .carry/llama-vk.tar.xz.part00 to the carry list of a call with room, or of the STAGE=peers call)
#   (the headers: STAGE=peers' synthetic SmolLM2 for multi-turn and the Qwen2.5 twin when the real file is missing)
#   then every planned call, back to back: `bash tools/device/recipes/real_models.sh` (stores; the call that
#   completes the models measures); afterwards `tools/device/lean_tree.sh off`.
# STAGE=peers (a call after the one that measured): the real files against llama.cpp CUDA, and issue 11's multi-turn
#   figure on the device (see the block below); stage with `pack.py ... --llamacpp` so that the CUDA build runs during
#   the storing calls.
# Output: $OUT/results.tgz (FAILED.txt for steps the budget skipped, run_<m>.txt, chat_<m>.txt, ppl_slice_<m>.json/.log, ppl_all_<m>.json/.log, gpu.txt,
# this recipe).
set -u
source tools/device/remote.sh
[ -f .carry/moby.txt ] && cp .carry/moby.txt $W/moby.txt
T0=$(date +%s)  # for el (remote.sh) until wg_results starts the budget
declare -A FILE=([qwen25-1.5b]=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf [gemma3-270m]=gemma-3-270m-q4_k_m.gguf)
ready=()
for m in ${REAL_MODELS:-qwen25-1.5b gemma3-270m}; do
  [ -n "${FILE[$m]:-}" ] || { el "no real model named $m (known: ${!FILE[*]})"; exit 1; }
  [ -f $W/models/${FILE[$m]} ] && ready+=($m)
done
wg_start_llamacpp_cuda  # when the sdist was carried (pack.py --llamacpp): built during the storing calls, for STAGE=peers
wg_llamacpp_vk          # when tools/peers/build_llamacpp_vulkan.sh's parts were carried
el "models arrived: ${ready[*]:-none}; text: $([ -f $W/moby.txt ] && echo yes || echo no); wgllm: $([ -x $B ] && echo yes || echo no)"
if [ "${STAGE:-main}" = peers ]; then
  # The real files against llama.cpp CUDA (built here from the same 0.3.36 sdist) and Vulkan (carried, built
  # from it), tools/peers/peer_llamacpp.sh's llama-bench, same GPU, same call: `bench ab` TTFT and decode at
  # 512 (+128) and 4096 (+64), ROUNDS (2) interleaved rounds; `bench --traffic` (decode as a fraction of copy
  # bandwidth, dispatches per step); then issue 11's multi-turn (`bench multi-turn --turns 30`, 3 runs, SmolLM2's
  # shape written here from its header: synthetic weights, the speed is real). Order: Qwen2.5-1.5B, multi-turn,
  # gemma-3-270m. Without the real Qwen2.5 file, its synthetic twin from the carried header (labelled).
  [ -x $B ] || { el "no wgllm here"; exit 1; }
  BUDGET_S=${BUDGET_S:-540}
  wg_results
  wg_gpu_check | tee $R/gpu.txt
  cp tools/device/recipes/real_models.sh $R/recipe_real_models.sh
  declare -A LB=()
  [ -x $LB_VK ] && LB[vulkan]=$LB_VK
  if [ -f $W/lcpp.log ]; then
    if wg_wait_llamacpp 240; then LB[cuda]=$LB_CUDA
    else fail "llama.cpp CUDA build not done or failed: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; fi
  fi
  el "peers: ${!LB[*]}"
  peers() {  # NAME FILE
    local n=$1 F=$2 pg p
    wg_step 90 $B bench -m $F --prompt-lengths 512 --gen 128 --reps 2 --traffic --json $R/traffic_$n.json --md $R/traffic_$n.md \
      > $R/traffic_$n.txt 2>&1 || fail "traffic $n"
    grep -E "dispatches per decode step|copy bandwidth" $R/traffic_$n.txt | head -3
    for p in cuda vulkan; do
      [ -n "${LB[$p]:-}" ] || continue
      for pg in "512 128" "4096 64"; do
        set -- $pg
        wg_step 200 $B bench ab --a "bench -m $F --prompt-lengths $1 --gen $2 --reps 1" \
          --b-cmd "bash tools/peers/peer_llamacpp.sh ${LB[$p]} $F $1 $2" --metric ttft_ms,decode_tok_s \
          --rounds ${ROUNDS:-2} --json $R/vs_llamacpp_${p}_${n}_p$1.json > $R/vs_llamacpp_${p}_${n}_p$1.txt 2>&1 \
          || fail "vs llama.cpp $p $n p$1"
        el "$n vs $p p$1: $(grep -E "B/A" $R/vs_llamacpp_${p}_${n}_p$1.txt | tr '\n' ' ')"
      done
    done
  }
  if [[ " ${ready[*]} " == *" qwen25-1.5b "* ]]; then peers qwen25-1.5b $W/models/${FILE[qwen25-1.5b]}
  elif wg_synth qwen25-1.5b; then
    echo "qwen25-1.5b-synthetic: synthetic weights (tools/synth/write_gguf.py ${WG_SYNTH_SRC[qwen25-1.5b]} --seed 1): the text is noise, the speed is real" >> $R/LABEL.txt
    peers qwen25-1.5b-synthetic ${WG_SYNTH[qwen25-1.5b]}
  else fail "qwen25-1.5b: neither the real file nor a synthetic one (carry .carry/synth)"; fi
  if wg_synth smollm2; then
    echo "multiturn_smollm2_*: synthetic weights (tools/synth/write_gguf.py ${WG_SYNTH_SRC[smollm2]} --seed 1): the text is noise, the speed is real" >> $R/LABEL.txt
    for k in 1 2 3; do
      wg_step 100 $B bench multi-turn -m ${WG_SYNTH[smollm2]} --turns 30 --json $R/multiturn_smollm2_r$k.json \
        > $R/multiturn_smollm2_r$k.txt 2>&1 || fail "multi-turn r$k"
      grep -h ttft_last_over_turn2 $R/multiturn_smollm2_r$k.txt
    done
  else fail "synthetic SmolLM2 file"; fi
  [[ " ${ready[*]} " == *" gemma3-270m "* ]] && peers gemma3-270m $W/models/${FILE[gemma3-270m]}
  el done
  exit 0
fi
[ ${#ready[@]} = ${REAL_COUNT:-2} ] && [ -f $W/moby.txt ] && [ -x $B ] || exit 0
# Every step runs under a timeout sized to what is left of BUDGET_S (540 s of the call's 600 here) and is
# skipped when under 30 s are left (wg_step), so that the EXIT trap always packs the results within the call.
BUDGET_S=${BUDGET_S:-540}
wg_results
wg_gpu_check | tee $R/gpu.txt
cp tools/device/recipes/real_models.sh $R/recipe_real_models.sh
$B devices > $R/devices.txt 2>&1
# Bytes 20000..32000, as the agreement test slices its std::string (not characters: the text is UTF-8).
python3 -c "import sys; t=open(sys.argv[1], 'rb').read(); open(sys.argv[2], 'wb').write(t[20000:32000])" \
  $W/moby.txt $W/moby_20000_12000.txt
for m in "${ready[@]}"; do
  F=$W/models/${FILE[$m]}
  if [ $m = gemma3-270m ]; then
    el "$m: run (raw: a base model)"
    wg_step 120 $B run -m $F --raw -p "The capital of France is" -n 24 --temp 0 --print-ids > $R/run_$m.txt 2>&1
  else
    el "$m: run"
    wg_step 120 $B run -m $F -p "Write a Python function that returns the n-th Fibonacci number." -n 96 --temp 0 --print-ids > $R/run_$m.txt 2>&1
    el "$m: chat"
    printf 'What is the capital of France? Answer in one sentence.\nAnd of Italy?\n' |
      wg_step 120 $B chat -m $F --temp 0 -n 48 > $R/chat_$m.txt 2>&1
  fi
  el "$m: perplexity, slice"
  wg_step 120 $B perplexity -m $F -f $W/moby_20000_12000.txt -c 512 --chunks 2 --json $R/ppl_slice_$m.json > $R/ppl_slice_$m.log 2>&1
  tail -1 $R/ppl_slice_$m.log
  if [ "${PPL_ALL:-1}" = 1 ]; then
    el "$m: perplexity, whole text"
    wg_step 240 $B perplexity -m $F -f $W/moby.txt -c 512 --json $R/ppl_all_$m.json > $R/ppl_all_$m.log 2>&1
    tail -1 $R/ppl_all_$m.log
  fi
  tail -4 $R/run_$m.txt | cut -c1-300
done
el done
