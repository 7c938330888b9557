#!/usr/bin/env bash
# Browser engine vs native on the H200 through Dawn in Node (issue 15, the fallback of
# browser_bench.sh: headless Chromium got no WebGPU adapter there, bench/results/2026-12-02-h200-browser).
# The same wasm build and page JS (web/wgllm.js -> worker.js) run under a carried Node with Dawn's
# WebGPU (web/node/bench.mjs, npm webgpu@0.6.2's dawn.node, backend vulkan, refusing any adapter
# that is not the hardware GPU); the native wgllm measures the same model on the same GPU in the
# same call, in interleaved rounds (ROUNDS, default 3; native first in odd rounds, Node first in
# even ones). Native runs twice a round: the product configuration (peer "native") and with
# --no-decode-pipeline (peer "native --no-decode-pipeline"), to tell that switch apart from the
# wasm/WebGPU cost. The browser build pipelines greedy decoding too (CreateEngine's decodePipeline,
# default on since 2026-12-02; NODE_ARGS="--decode-pipeline 0" measures it off) and prints, per
# prompt length, the wasm -> JS crossings and WebGPU calls of a decode step and its host split
# (node_r<k>.log, node_result_r<k>.json bench.rows[].decode_step_last_rep). Every Node figure is
# labelled "Dawn in Node, not a browser".
# SmolLM2-135M-Instruct Q4_1, product configuration, prompts of 512 and 4096 tokens, 128 decode
# steps, 3 reps per round (+1 warm-up rep), 32 greedy tokens of the bench prompt compared with
# `wgllm run --print-ids`.
# Staging (here, repo root, after `make build web`):
#   tools/device/browser/stage_node.sh        # ~/.cache/wgllm/node-dawn/carry: node.xz, webgpu.tar.xz
#   python3 tools/device/pack.py --bin wgllm --gl --extra ~/.cache/wgllm/node-dawn/carry=nodedawn \
#     build-wasm/web=wasm --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Calls, back to back (the machine keeps /root/wg only while warm): every planned call runs
# `bash tools/device/recipes/node_bench.sh` with that call's carry list (plus .carry/models.sha256);
# each stores what it carried and, once everything has arrived, measures (the last call).
# STAGE=adapter: only the adapter check (a few seconds), once Node and Dawn have arrived.
# STAGE=arch: issue 15 item 2 on the H200, one model per architecture (synthetic weights written here
# by tools/synth: SmolLM2 and Qwen2.5-1.5B shapes from the carried headers, LFM2-1.2B, Qwen3.5-0.8B and
# gemma-3-270m from their configs): the native CLI's ARCH_N (16) greedy ids of the bench prompt and
# the browser build's under Dawn in Node, compared (exit 3 on a mismatch); results.tgz holds
# native_<m>.txt, greedy_<m>.json/.log and exits.txt. Needs the .carry/synth headers (pack.py
# --extra /tmp/synth=synth) besides the Node, wasm and wgllm carries; no model carry.
# STAGE=robust: the Dawn-in-Node bench under Dawn device toggles (ROBUST_VARIANTS), native before and after
# (node_v<i>.json / .options, native_{before,after}.json): what part of the browser's robustness costs.
# STAGE=switches: kernel switch sets (SWITCH_VARIANTS) natively, natively with --shader-checks, and in
# Dawn in Node with CreateEngine's switches (native_sw<i>.json, native_checks_sw<i>.json, node_sw<i>.json).
# Env: SYNTH (1: synthetic SmolLM2-shaped weights, see below), COMMIT (the commit measured, for summary.json), ROUNDS (3), BUDGET_S (330: no round starts
# later; call timeout 600), NODE_TIMEOUT (200 s per Node run), NODE_ARGS (more web/node/bench.mjs
# options, e.g. "--decode-pipeline 0").
# Output ($OUT): results.tgz (the results folder: native_run.txt, native_bench_r<k>.json,
# native_nodp_bench_r<k>.json, node_result_r<k>.json, logs, gpu.txt, summary.json) and summary.json.
set -u
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
ND=$W/nodedawn
mkdir -p $ND $W/wasm
[ -d .carry/nodedawn ] && cp .carry/nodedawn/* $ND/
[ -d .carry/wasm ] && cp .carry/wasm/wgllm.js .carry/wasm/wgllm.wasm $W/wasm/
if [ -f $ND/SHA256SUMS ] && [ ! -x $ND/node/bin/node ]; then
  ( cd $ND && sha256sum -c --quiet SHA256SUMS ) || { el "nodedawn: checksum mismatch"; exit 1; }
  mkdir -p $ND/node/bin && xz -d -T0 -c $ND/node.xz > $ND/node/bin/node.tmp && chmod +x $ND/node/bin/node.tmp &&
    mv $ND/node/bin/node.tmp $ND/node/bin/node
  tar xJf $ND/webgpu.tar.xz -C $ND && rm -f $ND/node.xz $ND/webgpu.tar.xz
fi
NODE=$ND/node/bin/node WEBGPU=$ND/package
el "node: $([ -x $NODE ] && $NODE --version || echo missing); dawn.node: $([ -f $WEBGPU/dist/linux-x64/dawn.node ] && echo ok || echo missing);" \
   "wasm: $(ls $W/wasm 2>/dev/null | tr '\n' ' '); wgllm: $([ -x $B ] && echo ok || echo missing)"
[ -x $NODE ] && [ -f $WEBGPU/dist/linux-x64/dawn.node ] || exit 0
ldd $WEBGPU/dist/linux-x64/dawn.node | grep "not found"
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || GGUF=$WEBGPU/package.json  # adapter check: any file
MODEL_NAME=SmolLM2-135M-Instruct-Q4_1
# SYNTH=1: SmolLM2's exact shapes and quant types with random weights, written here from the header
# carried as .carry/synth/smollm2.hdr.gz (tools/synth; no 3-call model carry; the text is noise, the
# speed is real; rows labelled synthetic).
if [ "${SYNTH:-0}" = 1 ]; then
  mkdir -p $W/synth && { [ -d .carry/synth ] && cp .carry/synth/* $W/synth/ || true; }
  [ -f $W/synth/smollm2.synthetic.gguf ] || python3 tools/synth/write_gguf.py --header $W/synth/smollm2.hdr.gz --seed 1 \
    $W/synth/smollm2.synthetic.gguf > /dev/null || { el "synthetic SmolLM2 not written"; exit 1; }
  GGUF=$W/synth/smollm2.synthetic.gguf MODEL_NAME=SmolLM2-135M-Instruct-Q4_1-shaped-synthetic
fi
NB=(web/node/bench.mjs --webgpu $WEBGPU --wasm-dir $W/wasm --adapter hardware --backend vulkan)
if [ "${STAGE:-}" = adapter ]; then
  $NODE "${NB[@]}" --model $GGUF --adapter-only 1 --out $OUT/node_adapter.json 2>&1 | grep -v "^Warning: max"
  exit
fi
if [ "${STAGE:-}" = arch ]; then
  [ -f $W/wasm/wgllm.wasm ] && [ -x $B ] || { el "not everything has arrived yet"; exit 0; }
  R=$W/res_arch; rm -rf $R; mkdir -p $R
  trap 'tar czf $OUT/results.tgz -C $R .' EXIT
  wg_gpu_check | tee $R/gpu.txt
  cp tools/device/recipes/node_bench.sh $R/recipe_node_bench.sh
  echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $R/LABEL.txt
  PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
  for m in ${ARCH_MODELS:-smollm2 qwen25-1.5b gemma3-270m lfm2-1.2b qwen35-0.8b}; do
    wg_synth $m 2>> $R/write_errors.txt || { el "$m: synthetic file not written"; echo "$m: not written" >> $R/exits.txt; continue; }
    F=${WG_SYNTH[$m]}
    $B run -m $F -p "$PROMPT" -n ${ARCH_N:-16} --ignore-eos -c 2048 --print-ids > $R/native_$m.txt 2> $R/native_$m.log
    timeout ${NODE_TIMEOUT:-200} $NODE "${NB[@]}" --model $F --greedy ${ARCH_N:-16} --lengths 16 --gen ${ARCH_N:-16} \
      --greedy-only 1 --native-ids $R/native_$m.txt --out $R/greedy_$m.json > $R/greedy_$m.log 2>&1
    echo "$m: exit $?" | tee -a $R/exits.txt
    grep -h "greedy tokens" $R/greedy_$m.log | cut -c1-200
  done
  exit
fi
[ -f $W/wasm/wgllm.wasm ] && [ -x $B ] && [ -f $GGUF ] && [ "$GGUF" != $WEBGPU/package.json ] || { el "not everything has arrived yet"; exit 0; }
# The bench's prompt text (web/bench_run.js takes its prompts from it), for the robust stage and the rounds below.
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
TEXT=$W/text/package/moby-dick/data/data.txt
# A diagnostic stage's results folder R=$W/$1 (emptied; packed into $OUT/results.tgz on exit), the GPU's
# state, this recipe and the weights' label in it; L: the prompt lengths (ROBUST_LENGTHS, 512,4096).
stage_results() {
  R=$W/$1; rm -rf $R; mkdir -p $R
  trap 'tar czf $OUT/results.tgz -C $R .' EXIT
  wg_gpu_check | tee $R/gpu.txt
  cp tools/device/recipes/node_bench.sh $R/recipe_node_bench.sh
  [ "${SYNTH:-0}" = 1 ] && echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $R/LABEL.txt
  L=${ROBUST_LENGTHS:-512,4096}
}
if [ "${STAGE:-}" = robust ]; then
  # Which part of the browser's robustness costs the decode (issue 15): the same Dawn-in-Node bench with
  # Dawn device toggles (diagnostics: a browser keeps its defaults), native before and after as the
  # control. ROBUST_VARIANTS: ";"-separated, each a space-separated list of --dawn-option values
  # ("" = Dawn's defaults). Default: defaults; disable_robustness (no checks at all);
  # vulkan_use_buffer_robust_access_2 off (Tint clamps the storage indices instead of the driver's
  # robustBufferAccess2); enable_integer_range_analysis_in_robustness (Tint leaves the indices it can
  # prove in range unclamped).
  stage_results res_robust
  $B bench -m $GGUF --prompt-lengths $L --gen 128 --reps 2 --json $R/native_before.json > $R/native_before.log 2>&1
  grep -E "^\|" $R/native_before.log | tail -2
  # (the ";" appended keeps a trailing "" variant: read drops one empty last field)
  IFS=';' read -ra vs <<< "${ROBUST_VARIANTS:-;enable-dawn-features=disable_robustness;disable-dawn-features=vulkan_use_buffer_robust_access_2;enable-dawn-features=enable_integer_range_analysis_in_robustness};"
  i=0
  for v in "${vs[@]}"; do
    # A variant starts only if it and the native run after it end within BUDGET_S (the call's limit is 600 s and
    # results.tgz is written on exit).
    (( $(date +%s) - T0 + ${NODE_TIMEOUT:-150} + 40 > ${BUDGET_S:-480} )) && { el "time budget: variant '$v' not run"; continue; }
    opts=(); for o in $v; do opts+=(--dawn-option "$o"); done
    echo "$v" > $R/node_v$i.options
    timeout ${NODE_TIMEOUT:-150} $NODE "${NB[@]}" --model $GGUF --text $TEXT --lengths $L --gen 128 --reps 2 "${opts[@]}" \
      --out $R/node_v$i.json > $R/node_v$i.log 2>&1
    el "variant $i '$v': exit $? $(grep -v '^Warning: max' $R/node_v$i.log | grep -E 'P=' | tr '\n' ' ' | cut -c1-200)"
    i=$((i + 1))
  done
  timeout 40 $B bench -m $GGUF --prompt-lengths $L --gen 128 --reps 2 --json $R/native_after.json > $R/native_after.log 2>&1
  grep -E "^\|" $R/native_after.log | tail -2
  exit
fi

if [ "${STAGE:-}" = switches ]; then
  # Kernel switch sets under the browser's robustness (issue 15): for each set in SWITCH_VARIANTS
  # (";"-separated, each in the native CLI's spelling; "" = the defaults), the native bench with it,
  # the native bench with it and --shader-checks (naga's bounds checks only), and the Dawn-in-Node
  # bench with it as CreateEngine's switches (Dawn's default toggles, as a browser). Natively first,
  # then Dawn, set by set; a set starts only if it ends within BUDGET_S.
  stage_results res_switches
  IFS=';' read -ra vs <<< "${SWITCH_VARIANTS:-};"
  i=0
  for v in "${vs[@]}"; do
    # (two native runs of at most 40 s each, then Node)
    (( $(date +%s) - T0 + ${NODE_TIMEOUT:-150} + 90 > ${BUDGET_S:-480} )) && { el "time budget: set '$v' not run"; continue; }
    echo "$v" > $R/sw$i.switches
    # shellcheck disable=SC2086  # $v: the set's flags, word-split on purpose
    timeout 40 $B bench -m $GGUF --prompt-lengths $L --gen 128 --reps 2 $v --json $R/native_sw$i.json > $R/native_sw$i.log 2>&1 ||
      el "set $i: native run exit $?"
    # shellcheck disable=SC2086
    timeout 40 $B bench -m $GGUF --prompt-lengths $L --gen 128 --reps 2 $v --shader-checks --json $R/native_checks_sw$i.json \
      > $R/native_checks_sw$i.log 2>&1 || el "set $i: native run with --shader-checks exit $?"
    timeout ${NODE_TIMEOUT:-150} $NODE "${NB[@]}" --model $GGUF --text $TEXT --lengths $L --gen 128 --reps 2 --switches "$v" \
      --out $R/node_sw$i.json > $R/node_sw$i.log 2>&1
    el "set $i '$v': node exit $? $(grep -v '^Warning: max' $R/node_sw$i.log | grep -E 'P=' | tr '\n' ' ' | cut -c1-160)" \
       "native $(grep -E '^\|' $R/native_sw$i.log | tail -2 | tr '\n' ' ' | cut -c1-160)"
    i=$((i + 1))
  done
  exit
fi

R=$W/res; rm -rf $R; mkdir -p $R
trap 'tar czf $OUT/results.tgz -C $R .; cp $R/summary.json $OUT/ 2>/dev/null' EXIT
wg_gpu_check | tee $R/gpu.txt
cp tools/device/recipes/node_bench.sh $R/recipe_node_bench.sh
PROMPT="Write a short story about a robot who learns to paint."
el "native greedy"
$B run -m $GGUF -p "$PROMPT" -n 32 --ignore-eos -c 4232 --print-ids > $R/native_run.txt 2>&1
grep token_ids $R/native_run.txt
native() {  # the product configuration, and with --no-decode-pipeline
  el "round $1: native bench (product; --no-decode-pipeline)"
  $B bench -m $GGUF --prompt-lengths 512,4096 --gen 128 --reps 3 --json $R/native_bench_r$1.json > $R/native_bench_r$1.log 2>&1 ||
    { el "native bench failed"; tail -5 $R/native_bench_r$1.log; }
  $B bench -m $GGUF --prompt-lengths 512,4096 --gen 128 --reps 3 --no-decode-pipeline --json $R/native_nodp_bench_r$1.json \
    > $R/native_nodp_bench_r$1.log 2>&1 || { el "native --no-decode-pipeline bench failed"; tail -5 $R/native_nodp_bench_r$1.log; }
}
node_bench() {
  el "round $1: Dawn in Node bench"
  timeout ${NODE_TIMEOUT:-200} $NODE "${NB[@]}" --model $GGUF --text $TEXT --lengths 512,4096 --gen 128 --reps 3 --greedy 32 \
    --native-ids $R/native_run.txt ${NODE_ARGS:-} --out $R/node_result_r$1.json > $R/node_r$1.log 2>&1
  echo "exit $?" >> $R/node_r$1.log
  grep -v "^Warning: max" $R/node_r$1.log | grep -E "adapter: backend|greedy tokens|P=|FAILED|exit" | cut -c1-300
}
wg_rounds native node_bench ${ROUNDS:-3} ${BUDGET_S:-330}  # (the EXIT trap must still run within the call)
wg_web_summary $R $MODEL_NAME
el done
