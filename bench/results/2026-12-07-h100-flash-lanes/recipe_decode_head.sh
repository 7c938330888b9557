#!/usr/bin/env bash
# H200 / H100: the decode step's head and launch count (issue 13: Qwen2.5-1.5B decode against llama.cpp
# CUDA; issue 11): the split argmax (`--argmax-workgroups`) and where a step's time goes, on files
# written here by tools/synth (synthetic weights: the text is noise, the speed is real).
# Parts (PARTS, in this order by default):
#   tests    kernels_test Ops.Argmax*, Ops.EmbedRmsnormSiluArgmax (the CPU sampler's argmax), Ops.AttentionFlash*, Ops.AttentionSlidingWindow*, Ops.Q6K* (the
#            6-bit Q6_K layout against the widened one, bit for bit), Ops.Matvec* (launch shapes by class, the
#            tall class's GPU default) and the per-type matmul tests, and
#            the carried matmul_int8_test / matmul_tiled_test / fused_ops_test, and hybrid_dispatch_test's
#            Qwen2 QKV launches (--fuse-qkv-formats: one launch, logits bits unchanged) when carried, and
#            qwen35_parity_test and fusion_switches_test's ShaderRuntimeChecks.* when carried
#   traffic  `bench --traffic` (bytes and GPU time per kernel with timestamps, dispatches per step) on
#            the Qwen2.5-1.5B, SmolLM2, LFM2-1.2B and Qwen3.5-0.8B shapes, product configuration
#   ab       `bench ab` decode after a 512-token prompt, meter decode_ms_p50 (256 steps x 3 repetitions
#            per run), 2 interleaved rounds: a null control (B = A = product) on the Qwen2.5 shape, then
#            A = `--argmax-workgroups 1` (the one-workgroup scan), B = product on the four shapes
#   q6k      `bench ab` A = `--no-q6k-packed` (Q6_K widened to 10 bits per weight), B = `--q6k-packed` (6.56
#            bits; the product until 2026-12-06), decode after 512 and TTFT 512, on the four shapes;
#            `bench diverge` product against q6k_packed=1 (must be 0 prompts: the same bits) on the Qwen2.5
#            and LFM2 shapes
#   cand     `bench ab` A = product, B = each of CANDS (";"-separated flag sets) on the MODELS shapes (a set
#            written "m1 m2@flags" on the shapes m1 m2 instead)
#   ttft_cand  `bench ab` TTFT (8 steps x 2 repetitions per run, 2 interleaved rounds) A = product, B = each of
#            CANDS (as cand, "m1 m2@flags" too; "m@BASE|MORE": A = product + BASE, B adds MORE) after
#            TTFT_LENGTHS (512 4096) on the MODELS shapes
#            (tcand<i>_<model>_<n>)
#   repeat   where the step's time goes: `bench` (decode after 512, 256 steps x 3 repetitions) of the product,
#            then with `--repeat-kernel L` for each label L of LABELS (every dispatch of that label
#            recorded twice: the p50 step minus the product's is the label's marginal cost in place),
#            then the product again, on the REPEAT_MODELS shapes (default qwen25-1.5b)
#   sweep    a kernel's marginal cost under other settings: for each "LABEL:cfg1;cfg2;..." of SWEEPS
#            ("|"-separated) and each model of SWEEP_MODELS (default qwen25-1.5b lfm2-1.2b), `bench` (as
#            repeat) with each cfg ("" = product) alone and with `--repeat-kernel LABEL`
#   ttft     `bench ab` A = `--no-q6k-packed`, B = `--q6k-packed`, TTFT of a 512-token prompt (8 steps x 3
#            repetitions), 2 interleaved rounds, on the LFM2-1.2B and Qwen3.5-0.8B shapes (the tiled
#            kernels' halved 6-bit unpacking)
#   peers    (after the llama.cpp CUDA build from the carried sdist, ~5 min, started at the call's start:
#            no timed run during it) `bench ab` the product against llama.cpp CUDA (decode after 512,
#            TTFT 512) on PEERS_MODELS (qwen25-1.5b smollm2)
#   traffic_base  `bench --traffic` (prompt 512, 256 steps) of a carried baseline build (wgllm-base: pack.py
#            --bin PATH=wgllm-base) and of this one, interleaved, 2 rounds, on TRAFFIC_MODELS (smollm2): issue
#            11's before/after traffic table on one card (tools/plots/plot_traffic_compare.py)
#   turns    `bench multi-turn --turns 30` (session TTFT per turn, turn 30 / turn 2) on TURNS_MODELS (smollm2),
#            then once more with --profile (GPU time of each turn's prefill forward and its attention's),
#            then each flag set of TURNS_CANDS (";"-separated) in a session-only run of its own
#   checks   the browser's bounds checks (issue 15) measured natively: `bench` (128 steps x 2) with and
#            without `--shader-checks` (naga's bounds checks, Restrict policy: every index clamped, storage
#            ones to the binding; until 2026-12-06 the flag added naga's loop bounding too; Dawn on a GPU with robustBufferAccess2 leaves storage indices to the hardware and
#            clamps the fixed-size arrays), 2 interleaved rounds, plus one `bench --traffic` of each (per-kernel
#            time: traffic_checks_*), on CHECKS_MODELS (smollm2) after prompts of CHECKS_LENGTHS (512 4096)
#   peers4096 (after the llama.cpp CUDA build) `bench ab` TTFT of a 4096-token prompt, the product against
#            llama.cpp CUDA, on PEERS4096_MODELS (smollm2)
#   matvec   `bench matvec` launch-shape sweeps, MV_SWEEPS = "TYPE:N:K:v1,v2,...|..." (variants as bench matvec's
#            --variants: ROWS/RPT/LANES[+int8][+tree])
#   peers_vk `bench ab` the product against llama.cpp Vulkan (carried .carry/llama-vk.tar.xz.part*, built by
#            tools/peers/build_llamacpp_vulkan.sh): decode after 512 and TTFT 512 on PEERS_VK_MODELS (qwen25-1.5b
#            lfm2-1.2b smollm2), TTFT 4096 on PEERS_VK4096_MODELS (none)
#   checks_cand  decode with and without --shader-checks for each flag set of CHECKS_CANDS (";"-separated,
#            "" = product) after CHECKS_LENGTHS (4096) on CHECKS_MODELS (smollm2): which launch shape the
#            checks hurt least
#   prefill  where a TTFT goes: `bench --prefill-profile` (per-kernel GPU time of the whole prompt's prefill,
#            timestamps around every dispatch) after PREFILL_LENGTHS (512,4096: comma-separated) on PREFILL_MODELS (smollm2
#            qwen35-0.8b qwen25-1.5b lfm2-1.2b), without and with --shader-checks (the browser's bounds checks'
#            share of each kernel; prefill_<off|on>_<model>.json)
#   flash_sweep  the prefill attention op alone (`bench attention`, SmolLM2's layer shape unless FLASH_SHAPE
#            gives other --heads/--kv-heads/--head-dim): a turn's FLASH_TOKENS (64) new tokens over
#            FLASH_CACHES (80 700 1400 2700) cached ones at each --attn-flash-split-tiles of FLASH_TILES
#            (1,2,4,8,16,32) and the adaptive rule, at the product's split target 2048 (flash_sweep_<cache>.json); then FLASH_LONG ("2048:2048"
#            tokens:cache pairs) on FLASH_LONG_SHAPES (Qwen3.5 / Qwen2.5-1.5B / SmolLM2 attention) for the
#            share of the FMA peak (flash_long_<i>_<pair>.json), with FLASH_EXTRA's flags (e.g. "--flash-lanes 8,16
#            --flash-lanes-threads 64,128": the lanes kernel's rows; FLASH_LINES of each printed, default 8);
#            FLASH_CACHES=" " skips the turn sweep
#   turns_ab `bench ab` of `bench multi-turn --turns 30 --session-only`, A = product, B = each flag set of TURNS_CANDS
#            (";"-separated) on TURNS_MODELS (smollm2), 2 interleaved rounds, metrics ttft_last5_median_ms (median session
#            TTFT of turns 26-30) and ttft_last_over_turn2 (turnsab<i>_<model>)
#   gdn_stage  the DeltaNet prefill scan's staging (--gdn-scan-stage): gdn_ops_test GdnOps.TiledScan* and
#            qwen35_parity_test when carried (bits of the staged tile on this GPU; the model against the CPU), then `bench gdn` (the layer alone, GPU timestamps, bits
#            compared) at GDN_TOKENS (512 4096), chunks 16 and 32, 8 columns, scan and prep staging (--gdn-prep-stage)
#            0 and 1 each (GDN_STAGES), --gdn-scan-prefetch GDN_PREFETCH (1), without and with
#            --shader-checks (gdn_stage_t<n>[_checks].json)
#   attn_checks  the decode attention op alone (`bench attention --tokens 1`, SmolLM2's layer shape) after
#            CHECKS_LENGTHS (512 4096) keys under each of naga's checks: none, bounds (--shader-checks),
#            loops (--shader-loop-bounding), both (attn_checks_<arm>_<n>.json)
# SYNTH_MODELS: the synthetic files to write (default qwen25-1.5b smollm2 lfm2-1.2b qwen35-0.8b); EXTRA_SYNTH:
# more (e.g. qwen35-2b for PEERS_MODELS)
# Staging: python3 tools/device/pack.py --bin wgllm kernels_test --gl [--llamacpp] --extra /tmp/synth2=synth
# Calls (2026-12-06): (1) BUDGET_S=420 PARTS="tests traffic ab" (the argmax split);
#        (2) BUDGET_S=560 PARTS="tests traffic q6k peers" (with --llamacpp; the Q6_K layout, then the
#        product of both against llama.cpp CUDA).
# Results: $OUT/results.tgz (raw files; summary by tools/device/recipes/decode_head_summary.py).
set -u
source tools/device/remote.sh
wg_results
case " ${PARTS:-tests traffic ab} " in *" peers "* | *" peers4096 "*) wg_start_llamacpp_cuda ;; esac
wg_synth_begin --gpu gpu_before.txt ${SYNTH_MODELS:-qwen25-1.5b smollm2 lfm2-1.2b qwen35-0.8b} ${EXTRA_SYNTH:-}
el "synthetic files"
Q=${WG_SYNTH[qwen25-1.5b]}
D="--prompt-lengths 512 --gen 256 --reps 3"
M="--metric decode_ms_p50,decode_tok_s --rounds 2"
ALL="qwen25-1.5b smollm2 lfm2-1.2b qwen35-0.8b"
# `bench ab` the product (A) against a llama.cpp llama-bench (B) on one file, NAME = the peer (cuda, vulkan):
#   peer_ab NAME LLAMA_BENCH MODEL        decode after 512 and TTFT 512 -> vs_NAME_MODEL
#   peer_ab4096 NAME LLAMA_BENCH MODEL    TTFT 4096                     -> ttft4096_vs_NAME_MODEL
peer_ab() {
  wg_ab vs_$1_$3 200 --a "bench -m ${WG_SYNTH[$3]} --prompt-lengths 512 --gen 128 --reps 1" \
    --b-cmd "bash tools/peers/peer_llamacpp.sh $2 ${WG_SYNTH[$3]} 512 128" --metric ttft_ms,decode_tok_s --rounds 2
}
# The naga bounds-check flag of an arm of the checks parts: on / off.
checks_flag() { [ $1 = on ] && echo --shader-checks || echo --no-shader-checks; }
peer_ab4096() {
  wg_ab ttft4096_vs_$1_$3 200 --a "bench -m ${WG_SYNTH[$3]} --prompt-lengths 4096 --gen 16 --reps 1" \
    --b-cmd "bash tools/peers/peer_llamacpp.sh $2 ${WG_SYNTH[$3]} 4096 16" --metric ttft_ms --rounds 2
}
# Each candidate of CANDS (";"-separated flag sets; "m1 m2@flags": on the shapes m1 m2 instead of MODELS): its
# line "<prefix><i>: flags" in cands.txt, then FN <prefix><i> MODEL FLAGS for each of its shapes.
#   each_cand PREFIX FN
each_cand() {
  local CS c ms m i=0
  IFS=';' read -ra CS <<< "${CANDS:-}"
  for c in "${CS[@]}"; do
    i=$((i + 1))
    ms=${MODELS:-qwen25-1.5b}
    case $c in *@*) ms=${c%%@*}; c=${c#*@} ;; esac
    echo "$1$i: $c" >> $R/cands.txt
    for m in $ms; do $2 $1$i $m "$c"; done
  done
}
# part cand: `bench ab` decode after 512, A = product, B = the flags -> NAME_MODEL
cand_decode() {
  case $3 in *"|"*) fail "cand $1: 'BASE|MORE' is a ttft_cand form"; return ;; esac
  wg_ab $1_$2 150 --a "bench -m ${WG_SYNTH[$2]} $D" --b "bench -m ${WG_SYNTH[$2]} $D $3" $M
}
# part ttft_cand: `bench ab` TTFT after each of TTFT_LENGTHS, A = product, B = the flags -> NAME_MODEL_N;
# flags "BASE|MORE": A = product + BASE, B = product + BASE + MORE (one switch on top of another)
cand_ttft() {
  local n A base="" f=$3
  case $f in *"|"*) base=${f%%|*}; f=${f#*|} ;; esac
  for n in ${TTFT_LENGTHS:-512 4096}; do
    A="bench -m ${WG_SYNTH[$2]} --prompt-lengths $n --gen 8 --reps 2 $base"
    wg_ab $1_$2_$n 200 --a "$A" --b "$A $f" --metric ttft_ms --rounds 2
  done
}
for part in ${PARTS:-tests traffic ab}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    if [ -x $W/bin/kernels_test ]; then
      timeout 120 $W/bin/kernels_test --gtest_filter='Ops.Argmax*:Ops.EmbedRmsnormSiluArgmax:Ops.Q6K*:Ops.Matvec*:AllTypes/*:Ops.AttentionFlash*:Ops.AttentionSlidingWindow*' \
        > $R/test_kernels.log 2>&1
      echo "kernels_test Ops.Argmax*, Ops.Q6K*, Ops.Matvec*, AllTypes/*, Ops.AttentionFlash*, Ops.AttentionSlidingWindow*: exit $?" | tee -a $R/tests.txt; tail -2 $R/test_kernels.log
    fi
    for t in matmul_int8_test matmul_tiled_test fused_ops_test gdn_ops_test; do
      [ -x $W/bin/$t ] || continue
      timeout 120 $W/bin/$t > $R/test_$t.log 2>&1
      echo "$t: exit $?" | tee -a $R/tests.txt; tail -1 $R/test_$t.log
    done
    if [ -x $W/bin/qwen35_parity_test ]; then  # (the tree's fixtures: the GPU default DeltaNet row split against the CPU twin)
      timeout 200 $W/bin/qwen35_parity_test > $R/test_qwen35_parity.log 2>&1
      echo "qwen35_parity_test: exit $?" | tee -a $R/tests.txt; tail -1 $R/test_qwen35_parity.log
    fi
    if [ -x $W/bin/fusion_switches_test ] && [ -f ${WG_SYNTH[smollm2]} ]; then  # naga's checks one at a time: bounds
      # bit-identical, loop bounding within tolerance (SmolLM2: the synthetic file; needs smollm2 in SYNTH_MODELS)
      mkdir -p $W/models
      [ -f $W/models/SmolLM2-135M-Instruct.Q4_1.gguf ] || ln -sf ${WG_SYNTH[smollm2]} $W/models/SmolLM2-135M-Instruct.Q4_1.gguf
      timeout 200 $W/bin/fusion_switches_test --gtest_filter='ShaderRuntimeChecks.*' > $R/test_fusion_switches.log 2>&1
      echo "fusion_switches_test ShaderRuntimeChecks.*: exit $?" | tee -a $R/tests.txt; tail -1 $R/test_fusion_switches.log
    fi
    if [ -x $W/bin/hybrid_dispatch_test ]; then  # (writes its tiny GGUFs; no fixtures needed by these)
      timeout 120 $W/bin/hybrid_dispatch_test --gtest_filter='*TwoFormats*:*Qwen2Attention*' > $R/test_hybrid_dispatch.log 2>&1
      echo "hybrid_dispatch_test Qwen2 QKV: exit $?" | tee -a $R/tests.txt; tail -1 $R/test_hybrid_dispatch.log
    fi
    el "tests"
    ;;
  traffic)
    for m in ${TRAFFIC_MODELS:-$ALL}; do
      wg_over && { fail "time budget: traffic $m not run"; continue; }
      timeout 90 $B bench -m ${WG_SYNTH[$m]} --prompt-lengths 512 --gen 128 --reps 2 --traffic --json $R/traffic_$m.json \
        --md $R/traffic_$m.md > $R/traffic_$m.txt 2>&1 || fail "traffic $m (exit $?)"
      grep -E "dispatches per decode step|whole decode step" $R/traffic_$m.txt | head -2
    done
    el "traffic"
    ;;
  ab)
    A="bench -m $Q $D"
    wg_ab null_qwen25-1.5b 150 --a "$A" --b "$A" $M
    for m in $ALL; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab argmax1_$m 150 --a "$A --argmax-workgroups 1" --b "$A" $M
    done
    el "ab"
    ;;
  q6k)
    A="bench -m $Q $D"
    wg_ab null_qwen25-1.5b 150 --a "$A" --b "$A" $M
    for m in $ALL; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab q6kwide_$m 150 --a "$A --no-q6k-packed" --b "$A --q6k-packed" --metric decode_ms_p50,ttft_ms --rounds 2
    done
    for m in qwen25-1.5b lfm2-1.2b; do
      wg_over && { fail "time budget: diverge $m not run"; continue; }
      timeout 120 $B bench diverge -m ${WG_SYNTH[$m]} --prompts 24 --gen 64 --b q6k_packed=1 --json $R/diverge_q6k_$m.json \
        > $R/diverge_q6k_$m.txt 2>&1 || fail "diverge $m (exit $?)"
      echo "== diverge $m: $(tail -1 $R/diverge_q6k_$m.txt)"
    done
    el "q6k"
    ;;
  cand)
    each_cand cand cand_decode
    el "cand"
    ;;
  ttft_cand)
    each_cand tcand cand_ttft
    el "ttft_cand"
    ;;
  repeat)
    LABELS=${LABELS:-attn_qk attn_v attn_qkv attention attn_output ffn_gate_up ffn_down output argmax embed}
    for m in ${REPEAT_MODELS:-qwen25-1.5b}; do
      for L in product $LABELS product; do
        wg_over && { fail "time budget: repeat $m $L not run"; continue; }
        X=""; [ $L = product ] || X="--repeat-kernel $L"
        n=repeat_${m}_$L; [ -e $R/$n.json ] && n=${n}_2
        timeout 60 $B bench -m ${WG_SYNTH[$m]} $D $X --json $R/$n.json > $R/$n.txt 2>&1 || fail "$n (exit $?)"
        echo "== $n: $(grep -E 'decode step p50|p50' $R/$n.txt | head -1)"
      done
    done
    el "repeat"
    ;;
  sweep)
    IFS='|' read -ra SW <<< "${SWEEPS:-}"
    j=0
    for sw in "${SW[@]}"; do
      L=${sw%%:*}
      IFS=';' read -ra CS <<< "${sw#*:}"
      for m in ${SWEEP_MODELS:-qwen25-1.5b lfm2-1.2b}; do
        i=0
        for c in "" "${CS[@]}"; do
          for X in "" "--repeat-kernel $L"; do
            wg_over && { fail "time budget: sweep $L $m not run"; continue; }
            n=sweep${j}_${L}_${m}_c${i}; [ -n "$X" ] && n=${n}_rep
            echo "$n: $c $X" >> $R/sweeps.txt
            timeout 60 $B bench -m ${WG_SYNTH[$m]} $D $c $X --json $R/$n.json > $R/$n.txt 2>&1 || fail "$n (exit $?)"
            echo "== $n [$c $X]: $(tail -1 $R/$n.txt | cut -c1-120)"
          done
          i=$((i + 1))
        done
      done
      j=$((j + 1))
    done
    el "sweep"
    ;;
  matvec)
    # `bench matvec` (one kernel alone, bursts of 32 dispatches timed by encoder timestamps, variants
    # interleaved) for each "TYPE:N:K:variant,variant,..." of MV_SWEEPS ("|"-separated).
    IFS='|' read -ra MS <<< "${MV_SWEEPS:-}"
    j=0
    for ms in "${MS[@]}"; do
      IFS=: read -r ty n k vs <<< "$ms"
      wg_over && { fail "time budget: matvec $ms not run"; continue; }
      timeout 150 $B bench matvec --types $ty --shapes $n:$k --variants "$vs" --reps 7 --json $R/matvec${j}_${ty}_${n}x${k}.json \
        > $R/matvec${j}_${ty}_${n}x${k}.txt 2>&1 || fail "matvec $ms (exit $?)"
      grep -E "^  $ty" $R/matvec${j}_${ty}_${n}x${k}.txt
      j=$((j + 1))
    done
    el "matvec"
    ;;
  peers_vk)
    # llama.cpp's Vulkan llama-bench, built on the dev machine (tools/peers/build_llamacpp_vulkan.sh) and
    # carried as .carry/llama-vk.tar.xz.part*; `bench ab` the product against it (decode after 512,
    # TTFT 512) on PEERS_VK_MODELS, then TTFT 4096 on PEERS_VK4096_MODELS.
    LB_VK=$W/llama-vk/llama-bench
    if [ ! -x $LB_VK ]; then
      ls .carry/llama-vk.tar.xz.part* > /dev/null 2>&1 || { fail "peers_vk: no llama-vk carried"; continue; }
      cat .carry/llama-vk.tar.xz.part* | python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' |
        tar xf - -C $W || { fail "peers_vk: unpack failed"; continue; }
      # The carried libgomp is only a fallback: the system's wins when there is one.
      ldconfig -p | grep -q "libgomp.so.1 " && rm -f $W/llama-vk/libgomp.so.1
    fi
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$W/llama-vk
    ldd $LB_VK | grep -E "not found|vulkan|gomp"
    $LB_VK --list-devices 2>&1 | tail -3
    # One untimed llama-bench run per file first, at the prompt length of the A/B: the first Vulkan run of
    # a 512-token prompt on a fresh machine took 77 ms against 19-21 ms after, in both calls of 2026-12-06
    # (a warm-up of 64 tokens did not remove it), which broke the TTFT interval of the A/B.
    for m in ${PEERS_VK_MODELS:-qwen25-1.5b lfm2-1.2b smollm2}; do
      timeout 120 $LB_VK -m ${WG_SYNTH[$m]} -p 512 -n 4 -r 1 > /dev/null 2>&1 || fail "peers_vk: warm-up $m"
    done
    for m in ${PEERS_VK4096_MODELS:-}; do
      timeout 120 $LB_VK -m ${WG_SYNTH[$m]} -p 4096 -n 4 -r 1 > /dev/null 2>&1 || fail "peers_vk: warm-up 4096 $m"
    done
    for m in ${PEERS_VK_MODELS:-qwen25-1.5b lfm2-1.2b smollm2}; do peer_ab vulkan $LB_VK $m; done
    for m in ${PEERS_VK4096_MODELS:-}; do peer_ab4096 vulkan $LB_VK $m; done
    el "peers_vk"
    ;;
  ttft)
    for m in lfm2-1.2b qwen35-0.8b; do
      A="bench -m ${WG_SYNTH[$m]} --prompt-lengths 512 --gen 8 --reps 3"
      wg_ab ttft_q6kwide_$m 150 --a "$A --no-q6k-packed" --b "$A --q6k-packed" --metric ttft_ms --rounds 2
    done
    el "ttft"
    ;;
  peers)
    wg_wait_llamacpp 420 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    el "llama.cpp built"
    for m in ${PEERS_MODELS:-qwen25-1.5b smollm2}; do peer_ab cuda $LB_CUDA $m; done
    el "peers"
    ;;
  traffic_base)
    # The same `bench --traffic` with a carried baseline build ($W/bin/wgllm-base, e.g. the commit of
    # issue 11's "before" table) and this one, interleaved base, this, base, this, on the same card.
    [ -x $W/bin/wgllm-base ] || { fail "traffic_base: no wgllm-base carried"; continue; }
    for m in ${TRAFFIC_MODELS:-smollm2}; do
      for r in 1 2; do
        for who in base this; do
          wg_over && { fail "time budget: traffic_base $m $who r$r not run"; continue; }
          bin=$B; n=traffic_this_${m}_r$r
          [ $who = base ] && bin=$W/bin/wgllm-base && n=traffic_base_${m}_r$r
          timeout 90 $bin bench -m ${WG_SYNTH[$m]} --prompt-lengths 512 --gen 256 --reps 1 --traffic --json $R/$n.json \
            --md $R/$n.md > $R/$n.txt 2>&1 || fail "$n (exit $?)"
          echo "== $n: $(grep -E 'dispatches per decode step' $R/$n.txt | head -1)"
        done
      done
    done
    el "traffic_base"
    ;;
  turns)
    for m in ${TURNS_MODELS:-smollm2}; do
      timeout 200 $B bench multi-turn -m ${WG_SYNTH[$m]} --turns 30 --json $R/multiturn_$m.json > $R/multiturn_$m.txt 2>&1 ||
        fail "multi-turn $m (exit $?)"
      tail -2 $R/multiturn_$m.txt
      timeout 200 $B bench multi-turn -m ${WG_SYNTH[$m]} --turns 30 --session-only --profile --json $R/multiturn_profile_$m.json \
        > $R/multiturn_profile_$m.txt 2>&1 || fail "multi-turn --profile $m (exit $?)"
      grep -E "^turn +(2|30): profile" $R/multiturn_profile_$m.txt
      # TURNS_CANDS: ";"-separated flag sets, each a session-only run of its own (multiturn_c<i>_<m>)
      i=0
      cands=()
      [ -n "${TURNS_CANDS:-}" ] && IFS=';' read -ra cands <<< "${TURNS_CANDS};"  # (";": a trailing "" = product is kept)
      for c in "${cands[@]}"; do
        i=$((i + 1))
        wg_over && { fail "time budget: turns candidate $c not run"; continue; }
        echo "$c" > $R/multiturn_c${i}_$m.flags
        timeout 120 $B bench multi-turn -m ${WG_SYNTH[$m]} --turns 30 --session-only $c --json $R/multiturn_c${i}_$m.json \
          > $R/multiturn_c${i}_$m.txt 2>&1 || fail "multi-turn candidate $c $m (exit $?)"
        echo "== candidate $c: $(grep -E '^turn +(2|30):' $R/multiturn_c${i}_$m.txt | sed 's/|.*//' | tr '\n' ' ')"
      done
    done
    el "turns"
    ;;
  checks)
    for m in ${CHECKS_MODELS:-smollm2}; do
      for n in ${CHECKS_LENGTHS:-512 4096}; do
        for r in 1 2; do
          for c in off on; do
            wg_over && { fail "time budget: checks $m $n $c r$r not run"; continue; }
            f=checks_${c}_${m}_${n}_r$r
            flag=$(checks_flag $c)
            timeout 120 $B bench -m ${WG_SYNTH[$m]} --prompt-lengths $n --gen 128 --reps 2 $flag --json $R/$f.json \
              > $R/$f.txt 2>&1 || fail "$f (exit $?)"
            [ $r = 1 ] && { timeout 120 $B bench -m ${WG_SYNTH[$m]} --prompt-lengths $n --gen 64 --reps 1 --traffic $flag \
              --json $R/traffic_checks_${c}_${m}_$n.json --md $R/traffic_checks_${c}_${m}_$n.md > $R/traffic_checks_${c}_${m}_$n.txt 2>&1 ||
              fail "traffic_checks_${c}_${m}_$n (exit $?)"; }
            echo "== $f: $(grep -E 'decode' $R/$f.txt | tail -1)"
          done
        done
      done
    done
    el "checks"
    ;;
  checks_cand)
    # Which decode-attention launch shape suffers least from the bounds checks: `bench` decode after
    # CHECKS_LENGTHS (4096) with and without --shader-checks for each ";"-separated flag set of
    # CHECKS_CANDS ("" = product), one run each (checkc<I>_{on,off}_<model>_<n>; flags in checkc<I>.flags).
    i=0
    IFS=';' read -ra cands <<< "${CHECKS_CANDS:-};"  # (the ";" keeps a trailing "" = product: read drops one empty last field)
    for cand in "${cands[@]}"; do
      echo "$cand" > $R/checkc$i.flags
      for m in ${CHECKS_MODELS:-smollm2}; do
        for n in ${CHECKS_LENGTHS:-4096}; do
          line=""
          for c in off on; do
            wg_over && { fail "time budget: checks_cand $i $c not run"; continue; }
            f=checkc${i}_${c}_${m}_$n
            flag=$(checks_flag $c)
            timeout 60 $B bench -m ${WG_SYNTH[$m]} --prompt-lengths $n --gen 128 --reps 2 $flag $cand --json $R/$f.json \
              > $R/$f.txt 2>&1 || fail "$f (exit $?)"
            line="$line $c $(python3 -c "import json; print(round(json.load(open('$R/$f.json'))['runs'][0]['decode_tok_s_median'], 1))" 2>/dev/null)"
          done
          echo "== checkc$i '$cand' $m $n:$line"
        done
      done
      i=$((i + 1))
    done
    el "checks_cand"
    ;;
  prefill)
    for m in ${PREFILL_MODELS:-smollm2 qwen35-0.8b qwen25-1.5b lfm2-1.2b}; do
      for c in off on; do
        wg_over && { fail "time budget: prefill $m $c not run"; continue; }
        f=prefill_${c}_$m
        timeout 150 $B bench -m ${WG_SYNTH[$m]} --prompt-lengths ${PREFILL_LENGTHS:-512,4096} --gen 2 --reps 2 --prefill-profile \
          $(checks_flag $c) --json $R/$f.json > $R/$f.txt 2>&1 || fail "$f (exit $?)"
        echo "== $f"; grep -A6 "^prefill profile" $R/$f.txt | cut -c1-90
      done
    done
    el "prefill"
    ;;
  flash_sweep)
    for c in ${FLASH_CACHES:-80 700 1400 2700}; do
      wg_over && { fail "time budget: flash_sweep $c not run"; continue; }
      f=flash_sweep_$c
      # shellcheck disable=SC2086  # FLASH_SHAPE: zero or more flags
      timeout 120 $B bench attention --tokens ${FLASH_TOKENS:-64} --cache $c ${FLASH_SHAPE:-} \
        --flash-split-tiles ${FLASH_TILES:-1,2,4,8,16,32} --split-targets 2048 --reps 20 --json $R/$f.json > $R/$f.txt 2>&1 || fail "$f (exit $?)"
      echo "== $f"; grep -E "flash" $R/$f.txt | cut -c1-150 | head -12
    done
    i=0
    IFS=';' read -ra shapes <<< "${FLASH_LONG_SHAPES:---heads 8 --kv-heads 2 --head-dim 256;--heads 12 --kv-heads 2 --head-dim 128;--heads 9 --kv-heads 3 --head-dim 64}"
    for sh in "${shapes[@]}"; do
      for pair in ${FLASH_LONG:-2048:2048}; do
        wg_over && { fail "time budget: flash_long $i $pair not run"; continue; }
        f=flash_long_${i}_${pair/:/_}
        echo "$sh" > $R/$f.flags
        # shellcheck disable=SC2086  # $sh: the shape's flags
        # shellcheck disable=SC2086  # FLASH_EXTRA: zero or more flags
        timeout 150 $B bench attention --tokens ${pair%%:*} --cache ${pair##*:} $sh --split-targets 2048 --reps 5 ${FLASH_EXTRA:-} \
          --json $R/$f.json > $R/$f.txt 2>&1 ||
          fail "$f (exit $?)"
        echo "== $f ($sh)"; grep -E "flash|tiled" $R/$f.txt | cut -c1-170 | head -${FLASH_LINES:-8}
      done
      i=$((i + 1))
    done
    el "flash_sweep"
    ;;
  turns_ab)
    for m in ${TURNS_MODELS:-smollm2}; do
      i=0
      IFS=';' read -ra cands <<< "${TURNS_CANDS:-}"
      for c in "${cands[@]}"; do
        i=$((i + 1))
        echo "$c" > $R/turnsab${i}_$m.flags
        mt="bench multi-turn -m ${WG_SYNTH[$m]} --turns 30 --session-only --json /dev/null"
        wg_ab turnsab${i}_$m 300 --a "$mt" --b "$mt $c" --metric ttft_last5_median_ms --metric ttft_last_over_turn2 --rounds 2
      done
    done
    el "turns_ab"
    ;;
  gdn_stage)
    if [ -x $W/bin/gdn_ops_test ]; then
      timeout 300 $W/bin/gdn_ops_test --gtest_filter='GdnOps.TiledScan*' > $R/test_gdn_ops.log 2>&1
      echo "gdn_ops_test TiledScan*: exit $?" | tee -a $R/tests.txt; tail -3 $R/test_gdn_ops.log
    fi
    if [ -x $W/bin/qwen35_parity_test ]; then
      timeout 200 $W/bin/qwen35_parity_test > $R/test_qwen35_parity.log 2>&1
      echo "qwen35_parity_test: exit $?" | tee -a $R/tests.txt; tail -3 $R/test_qwen35_parity.log
    fi
    for t in ${GDN_TOKENS:-512 4096}; do
      for chk in "" --shader-checks; do
        wg_over && { fail "time budget: gdn_stage $t $chk not run"; continue; }
        f=gdn_stage_t$t${chk:+_checks}
        # shellcheck disable=SC2086  # $chk: zero or one flag
        timeout 150 $B bench gdn --tokens $t --chunks 16,32 --scan-cols 8 --scan-stage ${GDN_STAGES:-0,1} --scan-prefetch ${GDN_PREFETCH:-1} --prep-stage ${GDN_STAGES:-0,1} --reps 5 $chk \
          --json $R/$f.json 2> $R/$f.txt || fail "$f (exit $?)"
        echo "== $f"; grep -E "chunk" $R/$f.txt | cut -c1-170
      done
    done
    el "gdn_stage"
    ;;
  attn_checks)
    for n in ${CHECKS_LENGTHS:-512 4096}; do
      for arm in none bounds loops both; do
        wg_over && { fail "time budget: attn_checks $arm $n not run"; continue; }
        case $arm in none) fl="";; bounds) fl=--shader-checks;; loops) fl=--shader-loop-bounding;;
          both) fl="--shader-checks --shader-loop-bounding";; esac
        f=attn_checks_${arm}_$n
        # shellcheck disable=SC2086  # $fl: zero to two flags
        timeout 120 $B bench attention --tokens 1 --cache $((n - 1)) --reps 20 $fl --json $R/$f.json > $R/$f.txt 2>&1 ||
          fail "$f (exit $?)"
        echo "== $f"; grep -E "gqa|per-row" $R/$f.txt | sed 's/GFLOP.*//' | head -12
      done
    done
    el "attn_checks"
    ;;
  peers4096)
    wg_wait_llamacpp 420 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    for m in ${PEERS4096_MODELS:-smollm2}; do peer_ab4096 cuda $LB_CUDA $m; done
    el "peers4096"
    ;;
  esac
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
