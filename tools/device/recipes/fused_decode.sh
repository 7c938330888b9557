#!/usr/bin/env bash
# H200, one call: --fused-decode (issue 14 item 4; attention_decode.wgsl QKN: the QK-norm, RoPE and
# KV store of LFM2 / Qwen3.5 / Gemma 3 attention layers done by the attention launch, one dispatch
# fewer per such layer; not bit-identical) on the LFM2-1.2B- and Qwen3.5-0.8B-shaped files written
# here by tools/synth (synthetic weights: the text is noise, the speed is real):
#   tests    fused_ops_test FusedOps.FusedDecode* / MatmulConvIn*, hybrid_dispatch_test and the two
#            parity tests' fused cases, when carried
#   ab       `bench ab` decode after a 64-, 512- and 4096-token prompt (short, medium, long context),
#            A = product, B = --fused-decode, meter decode_ms_p50 (256 steps x 3 repetitions), 4
#            interleaved rounds; a null control (A = B = product, 512) per model; on LFM2-1.2B also
#            --no-fuse-conv-in (B) against the product (A) at 512 (the ShortConv conv in the
#            in-projection's epilogue, bit-exact, default on)
#   diverge  `bench diverge --b fused_decode=1`, 24 prompts x 64 greedy tokens: the first generated
#            token at which B's text departs from A's, on the trained LFM2 and Qwen3.5 fixtures
#            (tests/fixtures/*_trained: real trained weights, meaningful text) and on both synthetic
#            files; a null control (a bit-exact switch, fuse_qk_norm=0: 0 prompts may diverge)
# Staging: python3 tools/device/pack.py --bin wgllm fused_ops_test hybrid_dispatch_test lfm2_parity_test qwen35_parity_test --gl --extra /tmp/synth=synth
# then this script in one call (PARTS="tests diverge ab" by default: the A/Bs last, each skipped past the budget). Results: $OUT/results.tgz.
set -u
source tools/device/remote.sh
wg_results
wg_synth_begin --gpu gpu_before.txt lfm2-1.2b qwen35-0.8b
el "synthetic files"
for part in ${PARTS:-tests diverge ab}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    for t in fused_ops_test hybrid_dispatch_test lfm2_parity_test qwen35_parity_test; do
      [ -x $W/bin/$t ] || continue
      f=
      [ $t = fused_ops_test ] && f=--gtest_filter='FusedOps.FusedDecode*:FusedOps.MatmulConvIn*'
      [ $t = lfm2_parity_test ] && f=--gtest_filter='*FusedConvIn*'
      [ $t = qwen35_parity_test ] && f=--gtest_filter='*FusedDecode*'
      timeout 120 $W/bin/$t $f > $R/test_$t.log 2>&1; echo "$t: exit $?" | tee -a $R/tests.txt
      tail -2 $R/test_$t.log
    done
    el "tests"
    ;;
  ab)
    for m in lfm2-1.2b qwen35-0.8b; do
      M=${WG_SYNTH[$m]}
      for p in 64 512 4096; do
        A="bench -m $M --prompt-lengths $p --gen 256 --reps 3"
        wg_ab fused_vs_product_${m}_p$p 150 --a "$A" --b "$A --fused-decode" --metric decode_ms_p50,decode_tok_s --rounds 4
      done
      A="bench -m $M --prompt-lengths 512 --gen 256 --reps 3"
      wg_ab null_product_${m}_p512 150 --a "$A" --b "$A" --metric decode_ms_p50,decode_tok_s --rounds 4
      [ $m = lfm2-1.2b ] && wg_ab conv_in_off_vs_product_${m}_p512 150 --a "$A" --b "$A --no-fuse-conv-in" \
        --metric decode_ms_p50,decode_tok_s --rounds 4
    done
    el "ab"
    ;;
  diverge)
    for m in tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf \
             ${WG_SYNTH[lfm2-1.2b]} ${WG_SYNTH[qwen35-0.8b]}; do
      n=$(basename $m .gguf); n=${n%.bf16}; n=${n%.synthetic}
      wg_over && { fail "time budget: diverge $n not run"; continue; }
      timeout 120 $B bench diverge -m $m --prompts 24 --gen 64 --b fused_decode=1 --json $R/diverge_$n.json \
        > $R/diverge_$n.txt 2>&1 || fail "diverge $n (exit $?)"
      echo "== diverge $n: $(tail -1 $R/diverge_$n.txt)"
    done
    timeout 120 $B bench diverge -m tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf --prompts 24 --gen 64 \
      --b fuse_qk_norm=0 --json $R/diverge_null_lfm2_trained.json > $R/diverge_null_lfm2_trained.txt 2>&1 || fail "diverge null"
    echo "== diverge null (fuse_qk_norm=0): $(tail -1 $R/diverge_null_lfm2_trained.txt)"
    el "diverge"
    ;;
  esac
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
