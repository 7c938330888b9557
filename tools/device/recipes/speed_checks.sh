#!/usr/bin/env bash
# H200, one call: the speed switches that landed together on 2026-12-02 (issue 11 / 14), each a
# `bench ab` with its switch off (A) and on (B), product configuration otherwise, on files written
# here by tools/synth (synthetic weights: the text is noise, the speed is real):
#   int8_decode  --matvec-int8 with its own launch shapes (kernels::matvec_shape) on LFM2-1.2B- and
#                Qwen2.5-1.5B-shaped files, decode after 512
#   int8_prefill --matmul-int8: `bench matmul --int8` at two LFM2-1.2B prefill shapes, TTFT 512 A/B
#   attn_chunk   --attn-chunk: `bench multi-turn --turns 30` A/B (session TTFT), the turn-30 / turn-2
#                ratio with the default, and the control (cold TTFT 512 / 4096: no change expected)
#   fusions      --fuse-qk-norm (LFM2 attention layers) A/B, decode after 512
#   fusions35    --fuse-qk-norm / --fuse-attn-gate A/B on a Qwen3.5-0.8B-shaped file (starts the
#                llama.cpp CUDA build in the background when its sdist is carried: pack.py --llamacpp)
#   flash        --attn-flash-unroll: `bench attention` (tiled, flash generated, flash loop form) at
#                T = 512 over 0 and 3584 cached keys, SmolLM2 (9/3 heads, HD 64) and Qwen2.5-1.5B
#                (12/2, HD 128) shapes; TTFT 512 / 4096 A/B of --attn-flash (GPU default off) on both
#   qkv          the QKV projection in parts of one weight type with Qwen2's biases, RoPE and the KV
#                store in its epilogue (2026-12-02, late): `bench --traffic` of the Qwen2.5-1.5B-shaped
#                file (dispatches per step), `bench ab` --no-fuse-qkv-rope-kv (A) vs default (B) on
#                it and --no-fuse-qkv vs default on LFM2-1.2B (whose Q6_K V layers are now 2 parts),
#                decode after 512; starts the llama.cpp CUDA build in the background
#   combine      --fuse-attn-combine (2026-12-03): `bench --traffic` of the Qwen2.5-1.5B-shaped file
#                (dispatches per step), `bench ab` --no-fuse-attn-combine (A) vs default (B), decode after
#                512, on the SmolLM2, Qwen2.5-1.5B and LFM2-1.2B shapes; a null control (A = B = the
#                product configuration, Qwen2.5-1.5B: the meter's noise band); the decode split length
#                (--attn-decode-split-len SPLIT_LENS vs the default 64) on the Qwen2.5-1.5B shape, 128
#                on the others and after a 2048-token prompt, and the fusion at split length 128
#   marginal     the marginal cost of each kernel in place (`bench --repeat-kernel LABEL`: its dispatches
#                recorded twice; 2 rounds interleaved with plain runs, decode after 512 and TTFT 512) on
#                the MARGINAL_MODELS (default qwen25-1.5b smollm2); marginal_summary.txt: the step-time
#                difference per label (decode: us per step; TTFT: ms)
#   kbatch       --attn-decode-k-batch (2026-12-03): `bench ab` --attn-decode-k-batch 1 (A, the default) vs 8
#                (B) on the Qwen2.5-1.5B, SmolLM2 and LFM2-1.2B shapes, decode after 512; and
#                --no-fuse-norm (B) vs default (A) on the Qwen2.5-1.5B shape
#   prefetch     --matvec-prefetch (2026-12-03, late): `bench ab` default (A) vs on (B) on the Qwen2.5-1.5B,
#                SmolLM2 and LFM2-1.2B shapes; --argmax-loads 1 (A) vs the default 16 (B) on the first two;
#                --attn-decode-k-batch 32 (B) vs the default 8 (A) on the Qwen2.5-1.5B shape; decode after 512
#   chunk        --submit-chunk with pipelined decoding (2026-12-03, late): `bench ab` the default 32 (A) vs 0
#                and 128 (B) on the SmolLM2 and Qwen2.5-1.5B shapes, 64 on SmolLM2; decode after 512, TTFT 512
#   dchunk       --decode-submit-chunk (2026-12-03, late): `bench ab` 32 (A, the earlier behaviour) vs the default
#                0 (B) on the SmolLM2 and Qwen2.5-1.5B shapes; starts the llama.cpp CUDA build for peers
#   mtprofile    where a session turn's TTFT goes (2026-12-03): `bench multi-turn --profile` on the SmolLM2
#                shape; `bench attention` for 76 new tokens over 185 and 2732 cached keys, two shapes
#   flashpf      --attn-flash-prefetch (2026-12-03): `bench attention` tiled / flash / flash-pf at 76 over 185
#                and 2732 and 512 over 0 and 3584 cached keys, two shapes
#   flashpf2     --attn-flash-split-tiles rows of `bench attention`; multi-turn default vs --attn-chunk
#                --attn-flash-prefetch (and with MT_TILES split tiles); --attn-decode-late-v (bench attention
#                --tokens 1, decode A/B); TTFT A/B of --attn-flash --attn-flash-prefetch
#   flashprod    flash attention as the GPU default (2026-12-03): multi-turn, TTFT 512 / 4096 and a decode control,
#                --no-attn-flash (A) vs product (B); the product against llama.cpp CUDA
#   prodpeers    flashprod's comparison with llama.cpp CUDA alone
#   keylanes     --attn-decode-key-lanes (2026-12-03, evening): `bench attention --tokens 1` at KL 1 / 2 / 4 / 8 x
#                split lengths (GPU timestamps), two shapes; kernels_test Ops.AttentionDecode* when carried
#   keylanes_ab  ... `bench ab` decode after 512 of KL 4 / KL 4 + split 64 / KL 8 + split 32 vs default
#   keylanes2    ... the kernel at 512 keys again; `bench ab` KL 8 + split 32 on four shapes / lengths; a null A/B
#   peers        wgllm in the product configuration (both int8 switches on for GPUs since
#                2026-12-02) and with both off (f32 activations, non-product; vs_cuda_f32_*; the
#                2026-12-02 runs before that change named the int8 arm vs_cuda_int8_*) against
#                llama.cpp CUDA (waits for the build), decode after 512 and TTFT 512
#   unmeasured   (2026-12-04, evening) every switch docs/FLAGS.md still called "not yet measured": `bench ab`
#                A = the product configuration, B = the switch's other setting, decode after 512 and TTFT 512
#                (D), 2 rounds, on the shapes it touches: --no-fuse-qkv, --no-fuse-gate-up, --no-vec4,
#                --no-fuse-silu, --no-fuse-qkv-rope-kv, --no-fuse-rope-kv, --prefill-tokens-per-wg 16;
#                --no-fuse-gdn-in, --no-gdn-fuse-decode (and prep / norm apart under it), --gdn-chunk 32 /
#                128 (TTFT 512 and 4096); --no-fuse-conv-state; --no-attn-prefill-split (TTFT 4096,
#                multi-turn turn 30); --no-sparse-tiled (bench long-context, 8192 tokens, sparse from 2048 keys
#                on the SmolLM2 shape, whose trained context is 8192); a null control
#   pchunk       --prefill-chunk (2026-12-04): `bench ab` TTFT at 4096 with chunk 512 (A, default) vs 2048 and
#                vs 4096 (B) on the Qwen2.5-1.5B and SmolLM2 shapes, TTFT at 512 as the control (one
#                chunk either way); `run --profile` of a ~3500-token raw prompt with chunks 512 / 2048 / 4096
#                (per-kernel GPU time of the last forward)
# Staging (here): the synth headers as in tools/device/recipes/matvec.sh, then
#   python3 tools/device/pack.py --bin wgllm --gl --extra /tmp/synth=synth
# Call: bash tools/device/recipes/speed_checks.sh   (PARTS="int8_decode attn_chunk" to choose;
# MODELS: the synthetic files to write, PEER_MODELS: the files of the peers part, PEER_ARGS: added
# to the wgllm arm there, PEER_F32=0: no
# f32-activation arm there; BUDGET_S: 470)
# Results: $OUT/results.tgz.
set -u
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
mkdir -p $W/res
trap 'tar czf $OUT/results.tgz -C $W/res .' EXIT
FAILED=0
fail() { echo "FAIL: $*" | tee -a $W/res/FAILED.txt; FAILED=1; }
declare -n SRC=WG_SYNTH_SRC FILE=WG_SYNTH
python3 -c "import numpy" || { fail "no numpy on the device"; exit 1; }
wg_gpu_check | tee $W/res/gpu.txt
for m in ${MODELS:-smollm2 lfm2-1.2b qwen25-1.5b qwen35-0.8b}; do
  wg_synth $m 2> >(tee -a $W/res/write_errors.txt >&2) || fail "synthetic file $m"
done
el "synthetic files"
echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $W/res/LABEL.txt
mt_summary() {  # mt_summary PREFIX: per `bench multi-turn` JSON $W/res/PREFIX_*.json the session TTFT of
  # turn 2 and turn 30, their ratio and the mean over turns 2..30, into $W/res/PREFIX_summary.txt
  python3 - $W/res/$1_*.json <<'PY' | tee $W/res/$1_summary.txt
import json, sys
for f in sys.argv[1:]:
    t = {x["turn"]: x["ttft_session_ms"] for x in json.load(open(f))["turns"]}
    mean = sum(t[k] for k in range(2, 31)) / 29
    print(f"{f.split('/')[-1]}: turn 2 {t[2]:.2f} ms, turn 30 {t[30]:.2f} ms, ratio {t[30] / t[2]:.3f}, mean 2..30 {mean:.2f} ms")
PY
}
ab() {  # ab NAME TIMEOUT ARGS...: bench ab into $W/res/NAME.{json,txt}
  local name=$1 t=$2; shift 2
  timeout $t $B bench ab "$@" --json $W/res/$name.json > $W/res/$name.txt 2>&1 || fail "$name (exit $?)"
  echo "== $name"; grep -E "B/A" $W/res/$name.txt | head -3
}
L=${FILE[lfm2-1.2b]} Q=${FILE[qwen25-1.5b]} S=${FILE[smollm2]}
D="--prompt-lengths 512 --gen 128 --reps 1"
for part in ${PARTS:-int8_decode int8_prefill attn_chunk fusions}; do
  # No part starts after BUDGET_S seconds (the call's limit is 600 s; results come back only if the
  # script exits by itself).
  [ $(( $(date +%s) - T0 )) -gt ${BUDGET_S:-470} ] && { fail "time budget: part $part not run"; continue; }
  case $part in
  int8_decode)
    ab int8_decode_lfm2 100 --a "bench -m $L $D --no-matvec-int8" --b "bench -m $L $D --matvec-int8" --metric decode_tok_s,ttft_ms --rounds 2
    ab int8_decode_qwen 120 --a "bench -m $Q $D --no-matvec-int8" --b "bench -m $Q $D --matvec-int8" --metric decode_tok_s,ttft_ms --rounds 2
    ;;
  int8_prefill)
    [ -n "${SKIP_KERNEL:-}" ] || timeout 90 $B bench matmul --type q4_K --int8 --no-per-row --shapes 16384:2048,2048:8192 --tokens 512 \
      --tiles 64x64/4x4,128x64/8x4,128x128/8x8 --reps 3 --json $W/res/matmul_int8_q4_K.json 2> $W/res/matmul_int8_q4_K.txt \
      || fail "bench matmul --int8 (exit $?)"
    tail -12 $W/res/matmul_int8_q4_K.txt
    for m in lfm2-1.2b qwen25-1.5b; do
      for p in 512 4096; do
        ab int8_prefill_${m}_p$p 100 --a "bench -m ${FILE[$m]} --prompt-lengths $p --gen 2 --reps 1 --no-matmul-int8" \
          --b "bench -m ${FILE[$m]} --prompt-lengths $p --gen 2 --reps 1 --matmul-int8" --metric ttft_ms --rounds 2
      done
    done
    ;;
  attn_chunk)
    # bench multi-turn prints no one-line JSON for bench ab: A (--no-attn-chunk) and B interleaved by
    # hand, 2 rounds; session TTFT of turn 30 / turn 2 and the mean over turns 2..30 per run.
    for r in 1 2; do
      for arm in A B; do
        X=""; [ $arm = A ] && X="--no-attn-chunk"
        timeout 60 $B bench multi-turn -m $S --turns 30 --session-only $X --json $W/res/multiturn30_${arm}_r$r.json \
          > $W/res/multiturn30_${arm}_r$r.txt 2>&1 || fail "multi-turn $arm r$r (exit $?)"
      done
    done
    mt_summary multiturn30
    ab attn_chunk_control 100 --a "bench -m $S --prompt-lengths 512,4096 --gen 16 --reps 2 --no-attn-chunk" \
      --b "bench -m $S --prompt-lengths 512,4096 --gen 16 --reps 2" --metric ttft_ms --rounds 2
    ;;
  qkv)
    wg_start_llamacpp_cuda
    timeout 60 $B bench -m $Q $D --traffic > $W/res/traffic_qwen25.md 2>&1 || fail "traffic qwen25 (exit $?)"
    grep -E "dispatches per decode step|attn_q|rope_kv|bias" $W/res/traffic_qwen25.md
    ab fuse_qkv_rope_kv_qwen25 120 --a "bench -m $Q $D --no-fuse-qkv-rope-kv" --b "bench -m $Q $D" --metric decode_tok_s --rounds 2
    ab fuse_qkv_lfm2 100 --a "bench -m $L $D --no-fuse-qkv" --b "bench -m $L $D" --metric decode_tok_s --rounds 2
    ;;
  fusions)
    ab fuse_qk_norm_lfm2 100 --a "bench -m $L $D --no-fuse-qk-norm" --b "bench -m $L $D" --metric decode_tok_s --rounds 2
    ;;
  fusions35)
    wg_start_llamacpp_cuda
    Q35=${FILE[qwen35-0.8b]}
    ab fuse_qk_norm_qwen35 100 --a "bench -m $Q35 $D --no-fuse-qk-norm" --b "bench -m $Q35 $D" --metric decode_tok_s --rounds 2
    ab fuse_attn_gate_qwen35 100 --a "bench -m $Q35 $D --no-fuse-attn-gate" --b "bench -m $Q35 $D" --metric decode_tok_s --rounds 2
    ab int8_both_qwen35 100 --a "bench -m $Q35 $D --no-matvec-int8 --no-matmul-int8" --b "bench -m $Q35 $D --matvec-int8 --matmul-int8" \
      --metric decode_tok_s,ttft_ms --rounds 2
    ;;
  flash)
    for shp in "9 3 64" "12 2 128"; do
      set -- $shp
      for c in 0 3584; do
        timeout 60 $B bench attention --tokens 512 --cache $c --heads $1 --kv-heads $2 --head-dim $3 --reps 10 \
          --json $W/res/attn_t512_c${c}_hd$3.json 2> $W/res/attn_t512_c${c}_hd$3.txt || fail "bench attention hd$3 c$c (exit $?)"
        echo "== attention T=512 cache=$c heads $1/$2 hd $3"; grep -E "tiled +split|flash" $W/res/attn_t512_c${c}_hd$3.txt
      done
    done
    for m in smollm2 qwen25-1.5b; do
      ab attn_flash_$m 120 --a "bench -m ${FILE[$m]} --prompt-lengths 512,4096 --gen 2 --reps 2" \
        --b "bench -m ${FILE[$m]} --prompt-lengths 512,4096 --gen 2 --reps 2 --attn-flash" --metric ttft_ms --rounds 2
    done
    ;;
  combine)
    timeout 60 $B bench -m $Q $D --traffic > $W/res/traffic_qwen25.md 2>&1 || fail "traffic qwen25 (exit $?)"
    grep -E "dispatches per decode step|attention|attn_output" $W/res/traffic_qwen25.md
    for m in smollm2 qwen25-1.5b lfm2-1.2b; do
      ab fuse_attn_combine_$m 120 --a "bench -m ${FILE[$m]} $D --no-fuse-attn-combine" --b "bench -m ${FILE[$m]} $D" \
        --metric decode_tok_s,ttft_ms --rounds 2
    done
    ab null_qwen25 120 --a "bench -m $Q $D" --b "bench -m $Q $D" --metric decode_tok_s,ttft_ms --rounds 2
    for len in ${SPLIT_LENS:-32 128 256}; do
      ab split_len_${len}_qwen25 120 --a "bench -m $Q $D" --b "bench -m $Q $D --attn-decode-split-len $len" \
        --metric decode_tok_s --rounds 2
    done
    for m in smollm2 lfm2-1.2b; do
      ab split_len_128_$m 120 --a "bench -m ${FILE[$m]} $D" --b "bench -m ${FILE[$m]} $D --attn-decode-split-len 128" \
        --metric decode_tok_s --rounds 2
    done
    ab split_len_128_qwen25_p2048 120 --a "bench -m $Q --prompt-lengths 2048 --gen 128 --reps 1" \
      --b "bench -m $Q --prompt-lengths 2048 --gen 128 --reps 1 --attn-decode-split-len 128" --metric decode_tok_s --rounds 2
    ab fuse_attn_combine_split128_qwen25 120 --a "bench -m $Q $D --attn-decode-split-len 128 --no-fuse-attn-combine" \
      --b "bench -m $Q $D --attn-decode-split-len 128" --metric decode_tok_s --rounds 2
    ;;
  kbatch)
    for m in qwen25-1.5b smollm2 lfm2-1.2b; do
      ab k_batch_$m 120 --a "bench -m ${FILE[$m]} $D --attn-decode-k-batch 1" --b "bench -m ${FILE[$m]} $D --attn-decode-k-batch 8" \
        --metric decode_tok_s --rounds 2
    done
    ab no_fuse_norm_qwen25 120 --a "bench -m $Q $D" --b "bench -m $Q $D --no-fuse-norm" --metric decode_tok_s --rounds 2
    ;;
  prefetch)
    for m in qwen25-1.5b smollm2 lfm2-1.2b; do
      ab prefetch_$m 120 --a "bench -m ${FILE[$m]} $D" --b "bench -m ${FILE[$m]} $D --matvec-prefetch" \
        --metric decode_tok_s --rounds 2
    done
    for m in qwen25-1.5b smollm2; do
      ab argmax_loads_$m 120 --a "bench -m ${FILE[$m]} $D --argmax-loads 1" --b "bench -m ${FILE[$m]} $D" \
        --metric decode_tok_s --rounds 2
    done
    ab k_batch_32_qwen25 120 --a "bench -m $Q $D" --b "bench -m $Q $D --attn-decode-k-batch 32" --metric decode_tok_s --rounds 2
    ;;
  chunk)
    for m in smollm2 qwen25-1.5b; do
      for c in 0 128; do
        ab submit_chunk_${c}_$m 120 --a "bench -m ${FILE[$m]} $D" --b "bench -m ${FILE[$m]} $D --submit-chunk $c" \
          --metric decode_tok_s,ttft_ms --rounds 2
      done
    done
    ab submit_chunk_64_smollm2 120 --a "bench -m $S $D" --b "bench -m $S $D --submit-chunk 64" --metric decode_tok_s,ttft_ms --rounds 2
    ;;
  dchunk)
    wg_start_llamacpp_cuda
    for m in smollm2 qwen25-1.5b; do
      ab decode_submit_chunk_$m 120 --a "bench -m ${FILE[$m]} $D --decode-submit-chunk 32" --b "bench -m ${FILE[$m]} $D" \
        --metric decode_tok_s,ttft_ms --rounds 2
    done
    ;;
  mtprofile)
    # Where a session turn's time goes: `bench multi-turn --profile` (GPU time of each turn's prefill
    # forward and its attention share, per-kernel table of turn 30) on the SmolLM2 shape, and the
    # attention op alone for a turn's 76 new tokens over the caches of turn 2 (185) and turn 30 (2732),
    # SmolLM2 (9/3 heads, HD 64) and Qwen2.5-1.5B (12/2, HD 128) shapes, split targets 512..4096.
    timeout 90 $B bench multi-turn -m $S --turns 30 --session-only --profile --json $W/res/mtprofile_smollm2.json \
      > $W/res/mtprofile_smollm2.txt 2>&1 || fail "multi-turn --profile (exit $?)"
    grep -E "profile|turn (2|30):" $W/res/mtprofile_smollm2.txt | tail -40
    for c in 185 2732; do
      timeout 60 $B bench attention --tokens 76 --cache $c --split-targets 512,1024,2048,4096 --reps 20 \
        --json $W/res/attn76_smollm2_c$c.json > $W/res/attn76_smollm2_c$c.txt 2>&1 || fail "bench attention c$c (exit $?)"
      timeout 60 $B bench attention --tokens 76 --cache $c --heads 12 --kv-heads 2 --head-dim 128 \
        --split-targets 512,1024,2048,4096 --reps 20 --json $W/res/attn76_qwen25_c$c.json > $W/res/attn76_qwen25_c$c.txt 2>&1 \
        || fail "bench attention qwen c$c (exit $?)"
    done
    tail -n 14 $W/res/attn76_*.txt
    ;;
  flashpf)
    # --attn-flash-prefetch (2026-12-03): `bench attention` (tiled, flash, flash-pf rows) at the chat-turn
    # shapes (76 new tokens over 185 and 2732 cached keys) and the prefill shapes (512 over 0 and 3584),
    # SmolLM2 (9/3 heads, HD 64) and Qwen2.5-1.5B (12/2, HD 128) shapes, split targets 256..2048.
    for sh in "76 185" "76 2732" "512 0" "512 3584"; do
      set -- $sh
      timeout 60 $B bench attention --tokens $1 --cache $2 --split-targets 256,512,1024,2048 --reps 10 \
        --json $W/res/flashpf_smollm2_t$1_c$2.json > $W/res/flashpf_smollm2_t$1_c$2.txt 2>&1 || fail "flashpf smollm2 $sh (exit $?)"
      timeout 60 $B bench attention --tokens $1 --cache $2 --heads 12 --kv-heads 2 --head-dim 128 --split-targets 256,512,1024,2048 \
        --reps 10 --json $W/res/flashpf_qwen25_t$1_c$2.json > $W/res/flashpf_qwen25_t$1_c$2.txt 2>&1 || fail "flashpf qwen $sh (exit $?)"
    done
    grep -hE "^attention|tiled    split on  \(target 1024|flash(-pf)? " $W/res/flashpf_*.txt
    ;;
  flashpf2)
    # After flashpf (2026-12-03): the prefetching flash kernel with its key split's minimum tiles
    # (--attn-flash-split-tiles 1/2/4/8) at the chat-turn and prefill shapes, both head dims; then the
    # product question: `bench multi-turn --turns 30` default (tiled) vs the flash kernel with prefetch
    # for chat turns (--attn-chunk), 2 rounds interleaved; and `bench ab` TTFT 512 / 4096 default vs
    # --attn-flash --attn-flash-prefetch on the SmolLM2 and Qwen2.5-1.5B shapes.
    for sh in "76 185" "76 2732" "512 0" "512 3584"; do
      set -- $sh
      timeout 60 $B bench attention --tokens $1 --cache $2 --split-targets 512,2048 --flash-split-tiles 1,4,8 --reps 10 \
        --json $W/res/flashpf2_smollm2_t$1_c$2.json > $W/res/flashpf2_smollm2_t$1_c$2.txt 2>&1 || fail "flashpf2 smollm2 $sh (exit $?)"
      timeout 60 $B bench attention --tokens $1 --cache $2 --heads 12 --kv-heads 2 --head-dim 128 --split-targets 512,2048 \
        --flash-split-tiles 1,4,8 --reps 10 --json $W/res/flashpf2_qwen25_t$1_c$2.json > $W/res/flashpf2_qwen25_t$1_c$2.txt 2>&1 \
        || fail "flashpf2 qwen $sh (exit $?)"
    done
    grep -hE "^attention|tiled    split on  \(target 2048|flash(-pf)? +split on" $W/res/flashpf2_*.txt
    for r in 1 2; do
      for arm in A B C; do
        X=""; [ $arm = B ] && X="--attn-chunk --attn-flash-prefetch"; [ $arm = C ] && X="--attn-chunk --attn-flash-prefetch --attn-flash-split-tiles ${MT_TILES:-4}"
        timeout 60 $B bench multi-turn -m $S --turns 30 --session-only $X --json $W/res/mtflash_${arm}_r$r.json \
          > $W/res/mtflash_${arm}_r$r.txt 2>&1 || fail "multi-turn $arm r$r (exit $?)"
      done
    done
    mt_summary mtflash
    # --attn-decode-late-v: the decode kernel alone (512 and 2048 cached keys, both shapes), then decode A/B.
    for c in 512 2048; do
      timeout 60 $B bench attention --tokens 1 --cache $c --decode-split-lens 64,128,256 --reps 20 \
        --json $W/res/latev_smollm2_c$c.json > $W/res/latev_smollm2_c$c.txt 2>&1 || fail "latev smollm2 c$c (exit $?)"
      timeout 60 $B bench attention --tokens 1 --cache $c --heads 12 --kv-heads 2 --head-dim 128 --decode-split-lens 64,128,256 \
        --reps 20 --json $W/res/latev_qwen25_c$c.json > $W/res/latev_qwen25_c$c.txt 2>&1 || fail "latev qwen c$c (exit $?)"
    done
    grep -hE "^attention|gqa" $W/res/latev_*.txt
    for m in qwen25-1.5b smollm2; do
      ab latev_decode_$m 120 --a "bench -m ${FILE[$m]} $D" --b "bench -m ${FILE[$m]} $D --attn-decode-late-v" --metric decode_tok_s --rounds 2
    done
    for m in smollm2 qwen25-1.5b; do
      ab flash_ttft_$m 150 --a "bench -m ${FILE[$m]} --prompt-lengths 512,4096 --gen 16 --reps 2" \
        --b "bench -m ${FILE[$m]} --prompt-lengths 512,4096 --gen 16 --reps 2 --attn-flash --attn-flash-prefetch" --metric ttft_ms --rounds 2
    done
    ;;
  flashprod)
    # The product after flash attention became the GPU default (2026-12-03): A = --no-attn-flash (the
    # earlier product: the tiled kernel for T > 1), B = product. `bench multi-turn --turns 30` 2 rounds
    # interleaved; `bench ab` TTFT 512 / 4096 on the SmolLM2 and Qwen2.5-1.5B shapes; the control where
    # no change is expected (decode after 512: one-token steps never take the flash kernel); then the
    # product against llama.cpp CUDA (starts its build first).
    wg_start_llamacpp_cuda
    for r in 1 2; do
      for arm in A B; do
        X=""; [ $arm = A ] && X="--no-attn-flash"
        timeout 60 $B bench multi-turn -m $S --turns 30 --session-only $X --json $W/res/mtprod_${arm}_r$r.json \
          > $W/res/mtprod_${arm}_r$r.txt 2>&1 || fail "multi-turn $arm r$r (exit $?)"
      done
    done
    mt_summary mtprod
    for m in smollm2 qwen25-1.5b; do  # (bench ab's ttft_ms is the first prompt length's: one A/B per length)
      for p in 512 4096; do
        ab prod_ttft${p}_$m 150 --a "bench -m ${FILE[$m]} --prompt-lengths $p --gen 16 --reps 2 --no-attn-flash" \
          --b "bench -m ${FILE[$m]} --prompt-lengths $p --gen 16 --reps 2" --metric ttft_ms --rounds 2
      done
    done
    ab prod_decode_control_smollm2 100 --a "bench -m $S $D --no-attn-flash" --b "bench -m $S $D" --metric decode_tok_s --rounds 2
    ;&
  prodpeers)
    # (flashprod's second half, alone: the product against llama.cpp CUDA, decode after 512, TTFT 512 and 4096)
    wg_start_llamacpp_cuda
    wg_wait_llamacpp 420 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    for m in smollm2 qwen25-1.5b; do
      ab vs_cuda_$m 120 --a "bench -m ${FILE[$m]} $D" --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA ${FILE[$m]} 512 128" \
        --metric ttft_ms,decode_tok_s --rounds 2
    done
    for m in smollm2 qwen25-1.5b; do
      [ $(( $(date +%s) - T0 )) -gt ${BUDGET_S:-470} ] && { fail "time budget: vs_cuda_p4096_$m not run"; continue; }
      ab vs_cuda_p4096_$m 120 --a "bench -m ${FILE[$m]} --prompt-lengths 4096 --gen 16 --reps 1" \
        --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA ${FILE[$m]} 4096 16" --metric ttft_ms --rounds 2
    done
    ;;
  marginal)
    for m in ${MARGINAL_MODELS:-qwen25-1.5b smollm2}; do
      for r in 1 2; do
        for k in none attention attention_combine attn_output attn_qkv attn_qk attn_v ffn_gate_up ffn_down output argmax; do
          X=""; [ $k = none ] || X="--repeat-kernel $k"
          timeout 60 $B bench -m ${FILE[$m]} $D $X --json $W/res/marginal_${m}_${k}_r$r.json > $W/res/marginal_${m}_${k}_r$r.txt 2>&1 \
            || fail "marginal $m $k r$r (exit $?)"
        done
      done
    done
    python3 - $W/res/marginal_*_r?.txt <<'PY' | tee $W/res/marginal_summary.txt
import collections, json, re, statistics, sys
runs = collections.defaultdict(list)
for f in sys.argv[1:]:
    m, k = re.match(r".*/marginal_(.+?)_(none|attention_combine|attention|attn_output|attn_qkv|attn_qk|attn_v|ffn_gate_up|ffn_down|output|argmax)_r\d\.txt", f).groups()
    r = [json.loads(l) for l in open(f) if l.startswith('{"configuration"')][-1]  # bench's one-line result
    runs[(m, k)].append((1e6 / r["decode_tok_s"], r["ttft_ms"]))
for m in sorted({m for m, _ in runs}):
    base = runs[(m, "none")]
    step0, ttft0 = statistics.median(x[0] for x in base), statistics.median(x[1] for x in base)
    print(f"{m}: decode step {step0:.0f} us, TTFT 512 {ttft0:.2f} ms (plain runs: {[round(x[0]) for x in base]} us)")
    for (mm, k), v in sorted(runs.items()):
        if mm != m or k == "none": continue
        s, t = statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)
        print(f"  {k:18} decode +{s - step0:7.1f} us/step ({[round(x[0] - step0) for x in v]})   TTFT +{t - ttft0:6.2f} ms")
PY
    ;;
  keylanes)
    # --attn-decode-key-lanes (2026-12-03, evening), GPU time alone (timestamps; unaffected by a busy
    # host): `bench attention --tokens 1` gqa rows at KL 1 / 2 / 4 / 8 x split lengths, Qwen2.5-1.5B
    # shape (12 / 2 heads, HD 128) over 512 and 2048 keys, SmolLM2 shape (9 / 3, HD 64) over 512; and
    # the decode-attention tests of kernels_test when carried (KL on NVIDIA's subgroups).
    [ -x $W/bin/kernels_test ] && { timeout 200 $W/bin/kernels_test --gtest_filter='Ops.AttentionDecode*' \
      > $W/res/kernels_test_decode.txt 2>&1 || fail "kernels_test Ops.AttentionDecode* (exit $?)"; tail -3 $W/res/kernels_test_decode.txt; }
    for shape in "qwen25 511 12 2 128" "qwen25 2047 12 2 128" "smollm2 511 9 3 64"; do
      set -- $shape
      timeout 120 $B bench attention --tokens 1 --cache $2 --heads $3 --kv-heads $4 --head-dim $5 \
        --decode-split-lens 32,64,128,256 --decode-key-lanes 2,4,8 --reps 20 --json $W/res/keylanes_$1_c$2.json \
        2> $W/res/keylanes_$1_c$2.txt || fail "bench attention keylanes $1 $2 (exit $?)"
      grep -E "gqa" $W/res/keylanes_$1_c$2.txt
    done
    ;;
  keylanes_ab)
    # ... end to end: `bench ab` decode after 512, default (A, KL 1, split 128) vs KL 4 (B), KL 4 with
    # 64-key splits, and KL 8 with 32-key splits on the Qwen2.5-1.5B shape; KL 4 on the SmolLM2 shape.
    ab keylanes4_qwen25-1.5b 120 --a "bench -m $Q $D" --b "bench -m $Q $D --attn-decode-key-lanes 4" --metric decode_tok_s --rounds 2
    ab keylanes4_s64_qwen25-1.5b 120 --a "bench -m $Q $D" --b "bench -m $Q $D --attn-decode-key-lanes 4 --attn-decode-split-len 64" \
      --metric decode_tok_s --rounds 2
    ab keylanes8_s32_qwen25-1.5b 120 --a "bench -m $Q $D" --b "bench -m $Q $D --attn-decode-key-lanes 8 --attn-decode-split-len 32" \
      --metric decode_tok_s --rounds 2
    ab keylanes4_smollm2 100 --a "bench -m $S $D" --b "bench -m $S $D --attn-decode-key-lanes 4" --metric decode_tok_s --rounds 2
    ;;
  keylanes2)
    # ... second look (2026-12-03, evening): the kernel alone at 512 keys again (the first run's KL rows
    # there disagreed with the end-to-end A/B), then `bench ab` of KL 8 + 32-key splits vs default on
    # the Qwen2.5-1.5B shape after 512 and 2048 prompt tokens, the SmolLM2 and LFM2-1.2B shapes after 512,
    # and a null control (A = B = default, Qwen2.5-1.5B shape: the meter's noise band).
    timeout 60 $B bench attention --tokens 1 --cache 511 --heads 12 --kv-heads 2 --head-dim 128 \
      --decode-split-lens 32,128 --decode-key-lanes 8 --reps 20 --json $W/res/keylanes2_qwen25_c511.json \
      2> $W/res/keylanes2_qwen25_c511.txt || fail "bench attention keylanes2 (exit $?)"
    grep -E "gqa" $W/res/keylanes2_qwen25_c511.txt
    K8="--attn-decode-key-lanes 8 --attn-decode-split-len 32"
    ab keylanes8_s32_qwen25-1.5b_r2 120 --a "bench -m $Q $D" --b "bench -m $Q $D $K8" --metric decode_tok_s --rounds 2
    ab keylanes8_s32_p2048_qwen25-1.5b 150 --a "bench -m $Q --prompt-lengths 2048 --gen 128 --reps 1" \
      --b "bench -m $Q --prompt-lengths 2048 --gen 128 --reps 1 $K8" --metric decode_tok_s --rounds 2
    ab keylanes8_s32_smollm2 100 --a "bench -m $S $D" --b "bench -m $S $D $K8" --metric decode_tok_s --rounds 2
    ab keylanes8_s32_lfm2-1.2b 120 --a "bench -m $L $D" --b "bench -m $L $D $K8" --metric decode_tok_s --rounds 2
    ab null_qwen25-1.5b 120 --a "bench -m $Q $D" --b "bench -m $Q $D" --metric decode_tok_s --rounds 2
    ;;
  peers)
    wg_start_llamacpp_cuda
    wg_wait_llamacpp 400 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    for m in ${PEER_MODELS:-lfm2-1.2b qwen25-1.5b}; do
      F=${FILE[$m]}
      ab vs_cuda_$m 120 --a "bench -m $F $D ${PEER_ARGS:-}" \
        --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA $F 512 128" --metric ttft_ms,decode_tok_s --rounds 2
      [ "${PEER_F32:-1}" = 1 ] || continue
      ab vs_cuda_f32_$m 120 --a "bench -m $F $D --no-matvec-int8 --no-matmul-int8" \
        --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA $F 512 128" --metric ttft_ms,decode_tok_s --rounds 2
    done
    ;;
  unmeasured)
    Q35=${FILE[qwen35-0.8b]}
    ab um_null_smollm2 120 --a "bench -m $S $D" --b "bench -m $S $D" --metric decode_tok_s,ttft_ms --rounds 2
    for sw in --no-fuse-qkv --no-fuse-gate-up --no-vec4 --no-fuse-qkv-rope-kv "--prefill-tokens-per-wg 16"; do
      ab um_${sw//[- ]/_}_smollm2 120 --a "bench -m $S $D" --b "bench -m $S $D $sw" --metric decode_tok_s,ttft_ms --rounds 2
    done
    for sw in --no-fuse-gate-up --no-fuse-silu --no-fuse-qkv; do
      ab um_${sw//[- ]/_}_qwen25 150 --a "bench -m $Q $D" --b "bench -m $Q $D $sw" --metric decode_tok_s,ttft_ms --rounds 2
    done
    ab um_no_fuse_rope_kv_lfm2 120 --a "bench -m $L $D" --b "bench -m $L $D --no-fuse-rope-kv" --metric decode_tok_s,ttft_ms --rounds 2
    ab um_no_fuse_conv_state_lfm2 120 --a "bench -m $L $D" --b "bench -m $L $D --no-fuse-conv-state" --metric decode_tok_s,ttft_ms --rounds 2
    for sw in --no-fuse-gdn-in --no-gdn-fuse-decode --no-fuse-qkv; do
      ab um_${sw//[- ]/_}_qwen35 120 --a "bench -m $Q35 $D" --b "bench -m $Q35 $D $sw" --metric decode_tok_s,ttft_ms --rounds 2
    done
    for sw in --no-gdn-fuse-prep --no-gdn-fuse-norm; do  # apart, under --no-gdn-fuse-decode (which takes precedence)
      ab um_${sw//[- ]/_}_qwen35 120 --a "bench -m $Q35 $D --no-gdn-fuse-decode" --b "bench -m $Q35 $D --no-gdn-fuse-decode $sw" \
        --metric decode_tok_s --rounds 2
    done
    for c in 32 128; do
      for p in 512 4096; do
        ab um_gdn_chunk_${c}_p${p}_qwen35 120 --a "bench -m $Q35 --prompt-lengths $p --gen 8 --reps 2" \
          --b "bench -m $Q35 --prompt-lengths $p --gen 8 --reps 2 --gdn-chunk $c" --metric ttft_ms --rounds 2
      done
    done
    ab um_no_attn_prefill_split_p4096_smollm2 120 --a "bench -m $S --prompt-lengths 4096 --gen 8 --reps 2" \
      --b "bench -m $S --prompt-lengths 4096 --gen 8 --reps 2 --no-attn-prefill-split" --metric ttft_ms --rounds 2
    for r in 1 2; do  # multi-turn has no one-line JSON for bench ab: A and B interleaved by hand
      for arm in default no_attn_prefill_split; do
        extra=; [ $arm = default ] || extra=--no-attn-prefill-split
        timeout 100 $B bench multi-turn -m $S --turns 30 --session-only $extra --json $W/res/um_mt_${arm}_r$r.json \
          > $W/res/um_mt_${arm}_r$r.txt 2>&1 || fail "multi-turn $arm r$r (exit $?)"
      done
    done
    mt_summary um_mt
    for arm in "" --no-sparse-tiled; do
      timeout 120 $B bench long-context -m $S --contexts 8192 --modes sparse --sparse-threshold 2048 $arm --json $W/res/um_long_sparse${arm//-/_}.json \
        > $W/res/um_long_sparse${arm//-/_}.txt 2>&1 || fail "long-context $arm (exit $?)"
      tail -4 $W/res/um_long_sparse${arm//-/_}.txt
    done
    ;;
  pchunk)
    for m in qwen25-1.5b smollm2; do
      for c in 2048 4096; do
        [ $m = smollm2 ] && [ $c = 4096 ] && continue
        ab pchunk${c}_ttft4096_$m 150 --a "bench -m ${FILE[$m]} --prompt-lengths 4096 --gen 16 --reps 2" \
          --b "bench -m ${FILE[$m]} --prompt-lengths 4096 --gen 16 --reps 2 --prefill-chunk $c" --metric ttft_ms --rounds 2
      done
    done
    ab pchunk2048_ttft512_qwen25-1.5b 150 --a "bench -m $Q --prompt-lengths 512 --gen 16 --reps 2" \
      --b "bench -m $Q --prompt-lengths 512 --gen 16 --reps 2 --prefill-chunk 2048" --metric ttft_ms --rounds 2
    P=$(python3 -c "print(' '.join(['hello'] * 3500))")
    for c in 512 2048 4096; do
      timeout 60 $B run -m $Q --raw -p "$P" -n 1 --prefill-chunk $c --profile > $W/res/pchunk_profile_qwen_c$c.txt 2>&1 \
        || fail "profile c$c (exit $?)"
      tail -16 $W/res/pchunk_profile_qwen_c$c.txt
    done
    ;;
  esac
  el "$part"
done
nvidia-smi --query-gpu=clocks.sm,memory.used --format=csv
exit $FAILED
