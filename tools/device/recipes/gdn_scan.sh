#!/usr/bin/env bash
# H200, one call: the Gated DeltaNet prefill scan with a tile of the state in workgroup memory
# (--gdn-scan-cols, gdn_chunk_scan_tiled.wgsl, 2026-12-04) on a Qwen3.5-0.8B-shaped file written here
# by tools/synth (synthetic weights: the text is noise, the speed is real):
#   tests    gdn_ops_test GdnOps.* (the tiled scan's bits against the one-column scan) and
#            qwen35_parity_test, when carried
#   kernel   `bench gdn` (the chunked delta rule alone, GPU timestamps per kernel, bits compared across
#            tiles): 512 and 4096 tokens, chunks 16 / 32 / 64, scan tiles 0 / 4 / 8 / 16 / 32
#   profile  `run --profile` of a 500-token raw prompt: per-kernel GPU time with --gdn-scan-cols 0 (the
#            one-column kernel) and 4 / 8 / 16 / 32 columns, and chunks 32 / 64 at the default columns
#   ab       `bench ab` TTFT at 512 and 4096 tokens, A = --gdn-scan-cols 0, B = the product configuration;
#            a null control (A = B = product, 512); --gdn-chunk 32 and 64 (B) against the default (A)
#            at 512 and 4096 now that the scan is fast; decode after 512 as a control (the scan runs
#            only in prefill: no change expected)
# Staging: python3 tools/device/pack.py --bin wgllm gdn_ops_test qwen35_parity_test --gl --extra /tmp/synth=synth
# then this script in one call (PARTS="tests kernel profile ab" by default). Results: $OUT/results.tgz.
set -u
source tools/device/remote.sh
wg_results
wg_synth_begin qwen35-0.8b
M=${WG_SYNTH[qwen35-0.8b]}
el "synthetic file"
for part in ${PARTS:-tests kernel profile ab}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    for t in gdn_ops_test qwen35_parity_test; do
      [ -x $W/bin/$t ] || continue
      f=; [ $t = gdn_ops_test ] && f=--gtest_filter='GdnOps.*'
      timeout 200 $W/bin/$t $f > $R/test_$t.log 2>&1; echo "$t: exit $?" | tee -a $R/tests.txt
      tail -3 $R/test_$t.log
    done
    el "tests"
    ;;
  kernel)
    for t in 512 4096; do
      timeout 120 $B bench gdn --tokens $t --chunks 16,32,64 --scan-cols 0,4,8,16,32 --reps 5 --json $R/bench_gdn_t$t.json \
        2> $R/bench_gdn_t$t.txt || fail "bench gdn $t (exit $?)"
      cat $R/bench_gdn_t$t.txt
    done
    el "kernel"
    ;;
  profile)
    P=$(python3 -c "print(' '.join(['hello'] * 500))")
    for v in "cols0 --gdn-scan-cols 0" "cols4 --gdn-scan-cols 4" "cols8 --gdn-scan-cols 8" "cols16 --gdn-scan-cols 16" \
             "cols32 --gdn-scan-cols 32" "chunk32 --gdn-chunk 32" "chunk64 --gdn-chunk 64" "product"; do
      set -- $v; name=$1; shift
      timeout 90 $B run -m $M --raw -p "$P" -n 1 --profile "$@" > $R/profile_p500_$name.txt 2>&1 || fail "profile $name (exit $?)"
      echo "== $name: $(grep -E 'TTFT' $R/profile_p500_$name.txt | sed 's/.*TTFT/TTFT/') | $(grep -E ' gdn_chunk_(scan|prep) ' $R/profile_p500_$name.txt | tr -s ' ' | tr '\n' ';')"
    done
    el "profile"
    ;;
  ab)
    for p in 512 4096; do
      wg_ab scan_cols0_vs_product_p$p 150 --a "bench -m $M --prompt-lengths $p --gen 8 --reps 2 --gdn-scan-cols 0" \
        --b "bench -m $M --prompt-lengths $p --gen 8 --reps 2" --metric ttft_ms --rounds 2
    done
    wg_ab null_product_p512 90 --a "bench -m $M --prompt-lengths 512 --gen 8 --reps 2" \
      --b "bench -m $M --prompt-lengths 512 --gen 8 --reps 2" --metric ttft_ms --rounds 2
    for c in 32 64; do
      for p in 512 4096; do
        wg_ab chunk${c}_vs_product_p$p 90 --a "bench -m $M --prompt-lengths $p --gen 8 --reps 2" \
          --b "bench -m $M --prompt-lengths $p --gen 8 --reps 2 --gdn-chunk $c" --metric ttft_ms --rounds 2
      done
    done
    wg_ab decode_control_cols0_vs_product 90 --a "bench -m $M --prompt-lengths 512 --gen 128 --reps 1 --gdn-scan-cols 0" \
      --b "bench -m $M --prompt-lengths 512 --gen 128 --reps 1" --metric decode_tok_s --rounds 2
    el "ab"
    ;;
  esac
done
el "done"
