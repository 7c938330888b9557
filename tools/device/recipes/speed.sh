#!/usr/bin/env bash
# Decode/prefill speed on the H200: this build (wgllm) vs a baseline build (wgllm-base) and vs
# llama.cpp CUDA built there from the llama-cpp-python 0.3.36 sdist, SmolLM2-135M-Instruct Q4_1,
# product configuration, `wgllm bench ab` (two control arms, interleaved, bootstrap CI).
# Staging (here): python3 tools/device/pack.py --bin wgllm kernels_test smollm2_parity_test \
#     /path/to/base/wgllm=wgllm-base --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf \
#     --gl --llamacpp
# then the planned calls back to back: `bash tools/device/recipes/speed.sh store` for every call
# but the last (the first one also starts the llama.cpp CUDA build), `... speed.sh measure` last.
# MEASURE (space-separated, default all but exitcheck): parity traffic base base4096 cuda cuda4096 hybrids switches
# exitcheck; SWITCHES lists
# llama switches (flag names without --) measured as A = --no-<flag>, B = default (ab_*.json).
# Files are named for tools/device/summarize.py, which writes summary.json from them.
set -u
stage=${1:-measure}
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
LB=$LB_CUDA
wg_start_llamacpp_cuda
[ "$stage" = store ] && { $B devices 2>&1 | head -4; exit 0; }

GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
R=$W/res; rm -rf $R; mkdir -p $R; M=${MEASURE:-parity traffic base cuda hybrids}
wg_gpu_check | tee $R/gpu.txt
# Results travel back as one archive ($OUT returns at most 8 files), also when a step times out.
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
has() { [[ " $M " == *" $1 "* ]]; }
if has parity; then
  for t in gpu_test kernels_test gdn_ops_test smollm2_parity_test lfm2_parity_test qwen35_parity_test trained_hybrids_test \
           hybrid_dispatch_test model_load_test; do
    [ -x $W/bin/$t ] || continue
    $W/bin/$t > $R/test_$t.log 2>&1; echo "$t: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $R/test_$t.log | tr '\n' ' ')"
  done
  el "parity"
fi
if has exitcheck; then  # processes must end cleanly (a segfault at exit was seen on the H200)
  for m in $GGUF tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf; do
    $B run -m $m -p "Call me Ishmael." -n 8 --temp 0 > $R/exit_$(basename $m).log 2>&1; echo "run $(basename $m): exit $?"
  done
  if command -v cuda-gdb > /dev/null && [ -x $W/bin/qwen35_parity_test ]; then
    timeout 240 cuda-gdb -batch -ex run -ex bt -ex "info threads" --args $W/bin/qwen35_parity_test > $R/gdb_qwen35.log 2>&1
    grep -E "^#[0-9]+|signal|exited" $R/gdb_qwen35.log | head -30
  fi
  el "exitcheck"
fi
if has traffic; then
  $B bench --prompt-lengths 512 --gen 256 --reps 3 --traffic --json $R/wgllm_p512_g256.json --md $R/wgllm_p512_g256.md 2>&1 \
    | grep -E "^\| product|copy bandwidth|dispatch" | head -8
  $B bench --prompt-lengths 4096 --gen 64 --reps 2 --json $R/wgllm_p4096_g64.json 2>&1 | grep -E "^\| product"
  el "bench"
fi
ab() {  # NAME, then bench ab arguments
  local n=$1; shift
  timeout 280 "$@" --rounds ${ROUNDS:-3} --json $R/$n.json 2>&1 | tail -4; el "$n"
}
if has base && [ -x $W/bin/wgllm-base ]; then
  ab new_vs_base_p512 $W/bin/wgllm-base bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1" \
    --b "bench --prompt-lengths 512 --gen 128 --reps 1" --b-bin $B --metric ttft_ms,decode_tok_s
fi
if has base4096 && [ -x $W/bin/wgllm-base ]; then
  ab new_vs_base_p4096 $W/bin/wgllm-base bench ab --a "bench --prompt-lengths 4096 --gen 32 --reps 1" \
    --b "bench --prompt-lengths 4096 --gen 32 --reps 1" --b-bin $B --metric ttft_ms,decode_tok_s
fi
if has switches; then
  for f in ${SWITCHES:-}; do
    ab ab_SmolLM2__no-$f $B bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1 --no-$f" \
      --b "bench --prompt-lengths 512 --gen 128 --reps 1" --metric ttft_ms,decode_tok_s
  done
fi
if has cuda; then
  for i in $(seq 1 60); do grep -q BUILD_DONE $W/lcpp.log 2>/dev/null && break; sleep 5; done
  if grep -q "BUILD_DONE 0" $W/lcpp.log; then
    ab vs_llamacpp_cuda_p512_g256 $B bench ab --a "bench --prompt-lengths 512 --gen 256 --reps 1" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $LB $GGUF 512 256" --metric ttft_ms,decode_tok_s
    has cuda4096 && ab vs_llamacpp_cuda_p4096_g64 $B bench ab --a "bench --prompt-lengths 4096 --gen 64 --reps 1" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $LB $GGUF 4096 64" --metric ttft_ms,decode_tok_s
  else tail -5 $W/lcpp.log; fi
fi
if has hybrids; then
  for m in tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf; do
    n=$(basename $m .bf16.gguf)
    $B bench -m $m --prompt-lengths 512 --gen 64 --reps 3 --json $R/$n.json 2>&1 | grep -E "^\| product|dispatch"
    off="--no-fuse-conv-state"; [[ $n == qwen35* ]] && off="$off --no-gdn-fuse-decode --no-gdn-fuse-prep --no-gdn-fuse-norm"
    ab ab_${n}__recurrent_fusions $B bench ab --a "bench -m $m --prompt-lengths 512 --gen 64 --reps 1 $off" \
      --b "bench -m $m --prompt-lengths 512 --gen 64 --reps 1" --metric decode_tok_s,ttft_ms
  done
  el "hybrids"
fi
