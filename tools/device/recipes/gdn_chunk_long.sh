#!/usr/bin/env bash
# H200, one call: the length-dependent Gated DeltaNet prefill chunk (--gdn-chunk-long, built
# 2026-12-05 without a device; default off) on a Qwen3.5-0.8B-shaped file written here by tools/synth
# (synthetic weights: the text is noise, the speed is real). Its switch record's condition: TTFT at
# 4096 tokens faster beyond the null band, 512 within it (512-token forwards take the default's
# kernels: the control), and 1024 with the threshold at 1024 to place the threshold.
#   tests  qwen35_parity_test (GdnChunkLongFollowsForwardLength and the rest), when carried
#   ab     `bench ab` TTFT, 2 interleaved rounds, A = product, B = --gdn-chunk-long 32:
#          p512 (control: no change expected), p4096 (two 2048-token forwards: the measured case),
#          p1024 with --gdn-chunk-long-from 1024 (B) and p2048; a null control (A = B = product, 4096)
#   threshold  (not in the default PARTS) where the long chunk stops paying: 32 from 256 at p256 and
#          p512, and a chunk of 16 at p4096
# Staging: python3 tools/device/pack.py --bin wgllm qwen35_parity_test --gl --extra /tmp/synth=synth
# then this script in one call (PARTS="tests ab" by default). Results: $OUT/results.tgz; summary:
# python3 tools/device/recipes/gdn_chunk_long_summary.py DIR (raw/ = the unpacked results).
set -u
source tools/device/remote.sh
wg_results
wg_synth_begin qwen35-0.8b
M=${WG_SYNTH[qwen35-0.8b]}
el "synthetic file"
for part in ${PARTS:-tests ab}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    if [ -x $W/bin/qwen35_parity_test ]; then
      timeout 200 $W/bin/qwen35_parity_test > $R/test_qwen35_parity_test.log 2>&1
      echo "qwen35_parity_test: exit $?" | tee -a $R/tests.txt
      tail -3 $R/test_qwen35_parity_test.log
    fi
    el "tests"
    ;;
  ab)
    B1="bench -m $M --gen 8 --reps 2"
    wg_ab null_product_p4096 120 --a "$B1 --prompt-lengths 4096" --b "$B1 --prompt-lengths 4096" --metric ttft_ms --rounds 2
    for p in 512 4096 2048; do
      wg_ab chunklong32_vs_product_p$p 120 --a "$B1 --prompt-lengths $p" --b "$B1 --prompt-lengths $p --gdn-chunk-long 32" \
        --metric ttft_ms --rounds 2
    done
    wg_ab chunklong32_from1024_vs_product_p1024 120 --a "$B1 --prompt-lengths 1024" \
      --b "$B1 --prompt-lengths 1024 --gdn-chunk-long 32 --gdn-chunk-long-from 1024" --metric ttft_ms --rounds 2
    el "ab"
    ;;
  threshold)
    B1="bench -m $M --gen 8 --reps 2"
    for p in 512 256; do
      wg_ab chunklong32_from256_vs_product_p$p 120 --a "$B1 --prompt-lengths $p" \
        --b "$B1 --prompt-lengths $p --gdn-chunk-long 32 --gdn-chunk-long-from 256" --metric ttft_ms --rounds 2
    done
    wg_ab chunklong16_vs_product_p4096 120 --a "$B1 --prompt-lengths 4096" --b "$B1 --prompt-lengths 4096 --gdn-chunk-long 16" \
      --metric ttft_ms --rounds 2
    el "threshold"
    ;;
  esac
done
el "done"
