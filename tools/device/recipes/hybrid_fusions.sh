#!/usr/bin/env bash
# H200: the bit-exact decode fusions of the hybrid layers (branch fused, 2026-12-02):
#   --fuse-norm's wider scope (LFM2 operator norm, Qwen3.5 input norm, output norm before the head),
#   --fuse-qkv for LFM2, --fuse-qk-norm (QK-norm + RoPE + KV store: one dispatch), --fuse-attn-gate
#   (Qwen3.5's sigmoid gate in attn_output's activation load).
# 1. the bit-identity tests on the device (matvec.wgsl is the decode kernel there, not matmul.wgsl);
# 2. dispatches per decode step (printed by bench) and interleaved `bench ab` per new switch on the
#    trained hybrids (A = the switch off, B = default), 512-token prompt, 128 decode steps;
# 3. with BMAIN (main's wgllm binary, optional): this build vs main on the same models and SmolLM2
#    (the whole cut, `--b-bin`);
# 4. `bench diverge` null control: a bit-exact switch (fuse_qk_norm=0) must give 0 of 24 prompts diverged.
# Staging: python3 tools/device/pack.py --bin wgllm fused_ops_test fusion_switches_test hybrid_dispatch_test
#   --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/hybrid_fusions.sh store` for all planned calls but the last, `... measure` last.
# ROUNDS (default 5).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
wg_gpu_check | tee $R/gpu.txt
[ -x $W/bin/fused_ops_test ] && { $W/bin/fused_ops_test --gtest_filter='*QkNorm*:*MatmulGate*:*MatmulNorm*' > $R/test_fused_ops.log 2>&1; echo "fused_ops_test: exit $?"; }
[ -x $W/bin/fusion_switches_test ] && { $W/bin/fusion_switches_test --gtest_filter='Hybrids/*:Matvec/*' > $R/test_fusion_switches.log 2>&1; echo "fusion_switches_test: exit $?"; }
[ -x $W/bin/hybrid_dispatch_test ] && { $W/bin/hybrid_dispatch_test > $R/test_hybrid_dispatch.log 2>&1; echo "hybrid_dispatch_test: exit $?"; }
el "tests"
QWEN=tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf
LFM=tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf
ab() {  # name model flags-of-A
  timeout 250 $B bench ab --a "bench -m $2 --prompt-lengths 512 --gen 128 --reps 1 $3" \
    --b "bench -m $2 --prompt-lengths 512 --gen 128 --reps 1" --rounds ${ROUNDS:-5} \
    --metric decode_tok_s --json $R/ab_$1.json 2>&1 | tail -3
  el "ab $1"
}
ab lfm2_qk_norm $LFM --no-fuse-qk-norm
ab lfm2_qkv $LFM --no-fuse-qkv
ab qwen35_qk_norm $QWEN --no-fuse-qk-norm
ab qwen35_attn_gate $QWEN --no-fuse-attn-gate
if [ -n "${BMAIN:-}" ]; then  # main's binary as A, this build as B: the whole cut
  for m in $LFM $QWEN $GGUF; do
    n=$(basename $m .gguf)
    timeout 250 $BMAIN bench ab --a "bench -m $m --prompt-lengths 512 --gen 128 --reps 1" \
      --b "bench -m $m --prompt-lengths 512 --gen 128 --reps 1" --b-bin $B --rounds ${ROUNDS:-5} \
      --metric ttft_ms,decode_tok_s --json $R/ab_main_vs_fused_$n.json 2>&1 | tail -3
    el "main vs fused $n"
  done
fi
timeout 250 $B bench diverge -m $GGUF --prompts 24 --gen 64 --b fuse_qk_norm=0 --json $R/diverge_null_smollm2.json 2>&1 | tail -1
el "diverge null"
