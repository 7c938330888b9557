#!/usr/bin/env bash
# H200: the decode attention's thread count and prefetch (issue 13: Qwen2.5-1.5B decode against
# llama.cpp CUDA; `--attn-decode-threads`, `--attn-decode-prefetch`, with `--attn-decode-key-lanes`),
# on files written here by tools/synth (synthetic weights: the text is noise, the speed is real).
# Parts (PARTS, in this order by default):
#   tests    kernels_test Ops.AttentionDecode* (the CPU reference and PF's bit-exactness), when carried
#   ab       `bench ab` decode after a 512-token prompt, meter decode_ms_p50 (256 steps x 3
#            repetitions per run), 2 interleaved rounds, A = product, B = a candidate: a null control
#            (B = A), then on the Qwen2.5-1.5B shape (12 / 2 heads x 128): prefetch + 256 threads + 2
#            key lanes, the same without prefetch, prefetch alone (128 threads, 1 lane), prefetch + 512
#            threads + 4 lanes, prefetch + 128 threads + 2 lanes (two 64-key tiles per split); the first
#            candidate after a 2048-token prompt; on the SmolLM2 (9 / 3 x 64) and LFM2-1.2B shapes
#   marginal `bench --repeat-kernel attention` (every attention dispatch recorded twice; the step-time
#            difference is the kernel's marginal cost) and plain runs, product and CAND, 2 rounds
#   parity   the parity test binaries that were carried (WebGPU against the CPU twin and transformers'
#            logits, every architecture; the switch combinations; sessions), one log each
#   diverge  `bench diverge` product against OLD's switches, 24 prompts x 64 greedy tokens, on the trained
#            LFM2 / Qwen3.5 fixtures and the Qwen2.5 / SmolLM2 shapes (during the llama.cpp build)
#   peers    (after the llama.cpp CUDA build from the carried sdist, ~5.5 min, started at the call's
#            start: no timed run during it) `bench ab` the product against OLD (the decode attention's
#            former defaults: 128 threads, 1 key lane, no prefetch) on the Qwen2.5-1.5B, SmolLM2 and
#            LFM2-1.2B shapes, then the product against llama.cpp CUDA (decode after 512, TTFT 512) on
#            the Qwen2.5-1.5B and SmolLM2 shapes
#   mvshape  (information) --matvec-rows 16 and 64 against the product on the Qwen2.5-1.5B shape
#   mvrows   --matvec-rows 16 against the product on the Qwen2.5-1.5B, SmolLM2, LFM2-1.2B and
#            Qwen3.5-0.8B shapes; 8 on the Qwen2.5 shape
# Staging: python3 tools/device/pack.py --bin wgllm kernels_test [parity binaries] --gl [--llamacpp] --extra /tmp/synth2=synth
# Calls: (1) BUDGET_S=480 PARTS="tests ab marginal" (CAND the candidate before it became the default);
#        (2) BUDGET_S=560 PARTS="tests parity diverge peers mvshape" after the defaults changed;
#        (3) BUDGET_S=200 EXTRA_SYNTH=qwen35-0.8b PARTS="mvrows".
# Results: $OUT/results.tgz (raw files; summary by tools/device/recipes/decode_attn_summary.py).
set -u
source tools/device/remote.sh
wg_results
CAND=${CAND:---attn-decode-prefetch --attn-decode-threads 256 --attn-decode-key-lanes 2}
OLD="--attn-decode-threads 128 --attn-decode-key-lanes 1 --no-attn-decode-prefetch"
case " ${PARTS:-tests ab marginal} " in *" peers "*) wg_start_llamacpp_cuda ;; esac
wg_synth_begin --gpu gpu_before.txt qwen25-1.5b smollm2 lfm2-1.2b ${EXTRA_SYNTH:-}
el "synthetic files"
Q=${WG_SYNTH[qwen25-1.5b]}
D="--prompt-lengths 512 --gen 256 --reps 3"
M="--metric decode_ms_p50,decode_tok_s --rounds 2"
for part in ${PARTS:-tests ab marginal}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    if [ -x $W/bin/kernels_test ]; then
      timeout 120 $W/bin/kernels_test --gtest_filter='Ops.AttentionDecode*' > $R/test_kernels.log 2>&1
      echo "kernels_test Ops.AttentionDecode*: exit $?" | tee -a $R/tests.txt; tail -2 $R/test_kernels.log
    fi
    el "tests"
    ;;
  ab)
    A="bench -m $Q $D"
    wg_ab null_qwen25 150 --a "$A" --b "$A" $M
    wg_ab cand_qwen25 150 --a "$A" --b "$A $CAND" $M
    wg_ab t256_kl2_qwen25 150 --a "$A" --b "$A --attn-decode-threads 256 --attn-decode-key-lanes 2" $M
    wg_ab pf_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch" $M
    wg_ab pf_t512_kl4_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch --attn-decode-threads 512 --attn-decode-key-lanes 4" $M
    wg_ab pf_kl2_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch --attn-decode-key-lanes 2" $M
    A2="bench -m $Q --prompt-lengths 2048 --gen 256 --reps 3"
    wg_ab cand_p2048_qwen25 200 --a "$A2" --b "$A2 $CAND" $M
    for m in smollm2 lfm2-1.2b; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab cand_$m 150 --a "$A" --b "$A $CAND" $M
    done
    el "ab"
    ;;
  marginal)
    for r in 1 2; do
      for c in product cand; do
        X=""; [ $c = cand ] && X="$CAND"
        for k in none attention; do
          wg_over && { fail "time budget: marginal $c $k r$r not run"; continue; }
          K=""; [ $k = none ] || K="--repeat-kernel $k"
          timeout 60 $B bench -m $Q $D $X $K --json $R/marginal_${c}_${k}_r$r.json > $R/marginal_${c}_${k}_r$r.txt 2>&1 \
            || fail "marginal $c $k r$r (exit $?)"
        done
      done
    done
    el "marginal"
    ;;
  parity)
    mkdir -p $R/parity
    for t in kernels_test lfm2_parity_test qwen35_parity_test qwen2_parity_test gemma3_parity_test trained_hybrids_test \
             switch_combinations_test decode_pipeline_test batch_forward_test session_test; do
      [ -x $W/bin/$t ] || continue
      wg_over && { fail "time budget: $t not run"; continue; }
      s=$(date +%s)
      timeout 240 $W/bin/$t > $R/parity/$t.log 2>&1
      echo "$t: exit $? ($(( $(date +%s) - s )) s) $(grep -E '^\[  (PASSED|FAILED)' $R/parity/$t.log | tr '\n' ' ')" | tee -a $R/parity/summary.txt
    done
    el "parity"
    ;;
  diverge)
    # Greedy text of the product against the decode attention's former defaults (B), 24 prompts x 64
    # tokens: the trained LFM2 and Qwen3.5 fixtures (meaningful text) and the Qwen2.5 / SmolLM2 shapes.
    for m in tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf \
             $Q ${WG_SYNTH[smollm2]}; do
      n=$(basename $m .gguf); n=${n%.bf16}; n=${n%.synthetic}
      wg_over && { fail "time budget: diverge $n not run"; continue; }
      timeout 120 $B bench diverge -m $m --prompts 24 --gen 64 --b attention_decode_threads=128 \
        --b attention_decode_key_lanes=1 --b attention_decode_prefetch=0 --json $R/diverge_$n.json \
        > $R/diverge_$n.txt 2>&1 || fail "diverge $n (exit $?)"
      echo "== diverge $n: $(tail -1 $R/diverge_$n.txt)"
    done
    el "diverge"
    ;;
  peers)
    wg_wait_llamacpp 420 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    el "llama.cpp built"
    for m in qwen25-1.5b smollm2 lfm2-1.2b; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab old_$m 150 --a "$A" --b "$A $OLD" $M
    done
    for m in qwen25-1.5b smollm2; do
      wg_ab vs_cuda_$m 200 --a "bench -m ${WG_SYNTH[$m]} --prompt-lengths 512 --gen 128 --reps 1" \
        --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA ${WG_SYNTH[$m]} 512 128" --metric ttft_ms,decode_tok_s --rounds 2
    done
    el "peers"
    ;;
  mvshape)
    # Information for the next step (the matrix-vector launch shape of every matrix at once, not a
    # per-matrix rule): B = --matvec-rows 16 / 64 on the Qwen2.5-1.5B shape.
    A="bench -m $Q $D"
    for r in 16 64; do wg_ab mv_rows${r}_qwen25 150 --a "$A" --b "$A --matvec-rows $r" $M; done
    ;;
  mvrows)
    # --matvec-rows 16 (every matrix-vector launch 16 rows per workgroup) against the product on four
    # shapes, then 8 on the Qwen2.5 shape.
    for m in qwen25-1.5b smollm2 lfm2-1.2b qwen35-0.8b; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab mv_rows16_$m 150 --a "$A" --b "$A --matvec-rows 16" $M
    done
    A="bench -m $Q $D"
    wg_ab mv_rows8_qwen25-1.5b 150 --a "$A" --b "$A --matvec-rows 8" $M
    ;;
  esac
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
