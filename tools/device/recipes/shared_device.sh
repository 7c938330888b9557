#!/usr/bin/env bash
# H200, one call: many models in one process on one shared WebGPU device (gpu::Context's SharedDevice,
# 2026-12-05), and the product defaults decided that day, checked in the product.
#   tests    whole test binaries, each in ONE process (ctest runs one test per process and cannot see
#            this): gpu_test, hybrid_dispatch_test x3 (--gtest_repeat=3: ~90 models created and
#            destroyed), switch_combinations_test (every pair of switches, ~100 models), the LFM2 and
#            Qwen3.5 parity tests; the control: the binary of the commit before the shared device
#            (carried as hybrid_dispatch_test_old), which failed on the H200 with "no Vulkan adapter
#            found" after ~30 models
#   ab       `bench ab` in the new product configuration: Qwen3.5-0.8B TTFT at 4096 tokens, B =
#            --gdn-chunk-long 0 (the long chunk off: expected slower); LFM2-1.2B decode after 512
#            tokens, B = --fuse-conv-in (expected slower); a null control (A = B = product) per model
# Staging: python3 tools/device/pack.py --bin wgllm gpu_test hybrid_dispatch_test switch_combinations_test
#   lfm2_parity_test qwen35_parity_test /tmp/hd_old=hybrid_dispatch_test_old --gl --extra /tmp/synth=synth
# then this script in one call (PARTS="tests ab" by default). Results: $OUT/results.tgz.
set -u
source tools/device/remote.sh
wg_results
wg_synth_begin qwen35-0.8b lfm2-1.2b
el "synthetic files"
for part in ${PARTS:-tests ab}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    for t in gpu_test hybrid_dispatch_test_old hybrid_dispatch_test switch_combinations_test lfm2_parity_test qwen35_parity_test; do
      [ -x $W/bin/$t ] || continue
      f=
      case $t in hybrid_dispatch_test*) f=--gtest_repeat=3 ;; esac
      timeout 240 $W/bin/$t $f > $R/test_$t.log 2>&1; rc=$?
      echo "$t $f: exit $rc, $(grep -c '^\[       OK \]' $R/test_$t.log) ok, $(grep -c '^\[  FAILED  \] .*(' $R/test_$t.log) failed" | tee -a $R/tests.txt
      grep -m2 "no Vulkan adapter" $R/test_$t.log
    done
    el "tests"
    ;;
  ab)
    Q=${WG_SYNTH[qwen35-0.8b]} L=${WG_SYNTH[lfm2-1.2b]}
    A="bench -m $Q --gen 8 --reps 2 --prompt-lengths 4096"
    wg_ab null_product_qwen35-0.8b_p4096 150 --a "$A" --b "$A" --metric ttft_ms --rounds 2
    wg_ab chunklong_off_vs_product_qwen35-0.8b_p4096 150 --a "$A" --b "$A --gdn-chunk-long 0" --metric ttft_ms --rounds 2
    A="bench -m $L --prompt-lengths 512 --gen 256 --reps 3"
    wg_ab null_product_lfm2-1.2b_p512 150 --a "$A" --b "$A" --metric decode_ms_p50,decode_tok_s --rounds 2
    wg_ab conv_in_on_vs_product_lfm2-1.2b_p512 150 --a "$A" --b "$A --fuse-conv-in" --metric decode_ms_p50,decode_tok_s --rounds 2
    el "ab"
    ;;
  esac
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
