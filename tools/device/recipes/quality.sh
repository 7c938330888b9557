#!/usr/bin/env bash
# H200: quality of --sparse-attn on Qwen2.5-Coder-1.5B-Instruct Q4_K_M (issue 14 item 2) and
# agreement with llama.cpp on the real GGUFs (issue 13 item 3).
#   PART=ppl      wgllm perplexity, llama-perplexity's method, over the whole of Moby-Dick (public
#                 domain, ~290k tokens) at n_ctx 8192 / 16384 / 32768, sparse off and on (six runs;
#                 estimated from bench long-context: ~8 min; each run prints one JSON line)
#   PART=planted  wgllm bench planted-fact: a 5-digit code at depths 0.1 .. 0.9 of ~8k / 16k / 32k
#                 token prompts (chat template), dense and sparse (~4 min)
#   PART=int8     quality of --matmul-int8 / --matvec-int8 on the real 1.5B (issue 11): the four
#                 perplexity runs of tools/quality/int8_quality.sh (CHUNKS 512-token chunks of
#                 Moby-Dick, default 64; paired interval over chunks), then `bench diverge` of each
#                 switch off against the default (on for GPUs since 2026-12-02; where greedy output
#                 departs, 24 prompts, 64 tokens) and a null control (fuse_qkv_rope_kv=0, bit-exact:
#                 0 diverged expected). The 2026-12-02 run (5bee60b: int8 then off by default) used
#                 matvec_int8=1 / matmul_int8=1 as B.
#   PART=agree    builds llama.cpp's CPU backend there from .carry/llama.cpp.tgz (16 jobs, a few
#                 minutes) and runs tests/e2e/llamacpp_agreement_test on gemma-3-270m and the 1.5B
#                 (greedy continuations vs llama.cpp, perplexity within 0.5% of llama-perplexity)
# Staging: python3 tools/device/pack.py --bin wgllm llamacpp_agreement_test \
#     --model ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf ~/.cache/wgllm/models/gemma-3-270m-q4_k_m.gguf \
#     --extra ~/.cache/wgllm/text/package/moby-dick/data/data.txt=moby.txt --llamacpp
# then `bash tools/device/recipes/quality.sh store` for all calls but the last, and
# `PART=ppl bash tools/device/recipes/quality.sh`, `PART=planted ...`, `PART=agree ...` (one call
# each, back to back). Results: $OUT/results.tgz. CHUNK_TOKENS=N limits each perplexity run to
# N / n_ctx chunks (the first ones of the text); DEPTHS picks the planted-fact depths.
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ -f .carry/moby.txt ] && cp .carry/moby.txt $W/moby.txt
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
T0=$(date +%s)  # for el (remote.sh)
GGUF=$(wg_model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf) || exit 1
TXT=$W/moby.txt
R=$W/res; mkdir -p $R
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
wg_gpu_check | tee $R/gpu_$PART.txt
case "${PART:-ppl}" in
ppl)
  for c in 8192 16384 32768; do
    for m in no-sparse-attn sparse-attn; do
      ch=""; [ -n "${CHUNK_TOKENS:-}" ] && ch="--chunks $(( CHUNK_TOKENS / c ))"
      $B perplexity -m $GGUF -f $TXT -c $c $ch --$m --json $R/ppl_c${c}_$m.json 2>$R/ppl_c${c}_$m.err | tail -2
      el "ppl n_ctx=$c $m"
    done
  done ;;
planted)
  $B bench planted-fact -m $GGUF -f $TXT --lengths 8192,16384,32768 --depths ${DEPTHS:-0.1,0.25,0.5,0.75,0.9} \
    --json $R/planted_fact.json 2>&1 | tee $R/planted_fact.txt | grep -E "FOUND|missed|found"
  el "planted" ;;
int8)
  mkdir -p $W/text/package/moby-dick/data && cp $TXT $W/text/package/moby-dick/data/data.txt
  WGLLM=$B WGLLM_CACHE=$W timeout 360 bash tools/quality/int8_quality.sh $R/int8 0 ${CHUNKS:-64} \
    || echo "int8_quality.sh: exit $?"
  el "int8 perplexity"
  for sw in matvec_int8=0 matmul_int8=0 fuse_qkv_rope_kv=0; do
    timeout 120 $B bench diverge -m $GGUF --prompts 24 --gen 64 --b $sw --json $R/diverge_${sw%=*}.json 2>&1 | tail -2
  done
  el "diverge" ;;
agree)
  LB=$(LCPP_SRC_TGZ=$W/llama.cpp.tgz WGLLM_CACHE=$W bash tools/peers/build_llamacpp_cpu.sh 16 2>$R/lcpp_build.log) \
    || { tail -20 $R/lcpp_build.log; exit 1; }
  el "llama.cpp CPU build"
  WGLLM_LLAMACPP_TESTS=1 WGLLM_LLAMACPP_BIN=$LB WGLLM_PPL_TEXT=$TXT WGLLM_PPL_CHARS=40000 \
    $W/bin/llamacpp_agreement_test > $R/llamacpp_agreement_test.log 2>&1
  echo "llamacpp_agreement_test: exit $?"; grep -E "^\[(gemma|qwen)|PASSED|FAILED|SKIPPED" $R/llamacpp_agreement_test.log
  el "agreement" ;;
esac
