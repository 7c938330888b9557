#!/usr/bin/env bash
# H200, one call: how fine the decode meter is (issue 14: a null A/B of decode tok/s showed +-7.9%).
# On SmolLM2-135M- and Qwen2.5-1.5B-shaped files written here by tools/synth (synthetic weights: the
# text is noise, the speed is real; the +-7.9% was SmolLM2's, whose steps are the shortest), null A/Bs
# (A = B = the product configuration) with `bench ab`, per model:
#   null_old   decode_tok_s, 128 steps after a 512-token prompt, 1 repetition per run (the old meter)
#   null_p50   decode_ms_p50 (the median step over every step of every repetition) and decode_tok_s,
#              256 steps x 3 repetitions per run
#   effect     (SmolLM2) the same finer meter on a switch with a small effect (--no-fuse-attn-combine:
#              the attention's merge as its own dispatch again, one more per layer in decode): it must
#              be told apart from noise
# with the GPU's clocks and other processes printed before and after (contention check).
# Staging: python3 tools/device/pack.py --bin wgllm --gl --extra /tmp/synth=synth; one call.
# Results: $OUT/results.tgz.
set -u
source tools/device/remote.sh
wg_results
wg_synth_begin --gpu gpu_before.txt smollm2 qwen25-1.5b
el "synthetic files"
for m in smollm2 qwen25-1.5b; do
  M=${WG_SYNTH[$m]}
  OLD="bench -m $M --prompt-lengths 512 --gen 128 --reps 1"
  NEW="bench -m $M --prompt-lengths 512 --gen 256 --reps 3"
  wg_ab null_old_$m 200 --a "$OLD" --b "$OLD" --metric decode_tok_s --rounds 4
  wg_ab null_p50_$m 200 --a "$NEW" --b "$NEW" --metric decode_ms_p50,decode_tok_s --rounds 4
  [ $m = smollm2 ] && wg_ab effect_no_fuse_attn_combine_$m 200 --a "$NEW" --b "$NEW --no-fuse-attn-combine" \
    --metric decode_ms_p50,decode_tok_s --rounds 4
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
