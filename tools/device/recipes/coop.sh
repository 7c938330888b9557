#!/usr/bin/env bash
# H200 / H100: the GPU's matrix units from WGSL (--matmul-coop; issue 11 item 3, issue 13's TTFT at size):
# wgpu's experimental cooperative matrices through wgpu-native, on files written here by tools/synth
# (synthetic weights: the text is noise, the speed is real).
# Parts (PARTS, in this order by default):
#   probe    tools/probes/coop_matrix_probe (carried as bin/coop_matrix_probe): does the adapter list the feature,
#            does requestDevice grant it, which memory order each load reads, a 4096^3 f16 GEMM's TFLOP/s
#   tests    matmul_coop_test (every case against the f16-rounded and f32 CPU references), matmul_tiled_test
#   matmul   `bench matmul --coop --int8` on q4_K at the Qwen2.5-1.5B prefill shapes (QKV 2048:1536, O 1536:1536,
#            gate+up 17920:1536, down 1536:8960) and Qwen3.5-2B's FFN (12288:2048, 2048:6144), T = 512 and 4096
#            (matmul_<shapes>.json); COOP_TILES (default: the bench's five)
#   ttft     `bench ab` TTFT (8 steps x 2 repetitions per run, 2 interleaved rounds) A = product, B = --matmul-coop
#            after TTFT_LENGTHS (4096 512) on TTFT_MODELS (qwen25-1.5b qwen35-2b) -> coop_<model>_<n>; then the
#            same with COOP_EXTRA (e.g. a tile) when set -> coopx_<model>_<n>
#   decode   a control: `bench ab` decode after 512 (A = product, B = --matmul-coop) on qwen25-1.5b: the device
#            with the experimental feature must not change kernels that do not use it -> decode_ctl
# Staging: python3 tools/device/pack.py --bin wgllm matmul_coop_test matmul_tiled_test \
#            /tmp/coop_matrix_probe=coop_matrix_probe --gl --extra /tmp/synth2=synth
# Results: $OUT/results.tgz (raw files).
set -u
source tools/device/remote.sh
wg_results
for part in ${PARTS:-probe tests matmul ttft decode}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  [ -n "${NO_COOP:-}" ] && case $part in matmul | ttft | decode) echo "part $part skipped: no cooperative matrices"; continue ;; esac
  case $part in
  probe)
    wg_gpu_check | tee $R/gpu_before.txt
    $B devices > $R/devices.txt 2>&1
    timeout 240 $W/bin/coop_matrix_probe > $R/probe.txt 2>&1 || fail "probe (exit $?)"
    cat $R/probe.txt
    # Without a granted device the other parts would time the product against itself: they are skipped.
    grep -q "with CooperativeMatrix: granted" $R/probe.txt || { NO_COOP=1; fail "cooperative matrices not granted"; }
    el "probe"
    ;;
  tests)
    for t in matmul_coop_test matmul_tiled_test; do
      [ -x $W/bin/$t ] || continue
      timeout 240 $W/bin/$t > $R/test_$t.log 2>&1
      echo "$t: exit $?" | tee -a $R/tests.txt; grep -E "SKIPPED|FAILED|PASSED|Skipped" $R/test_$t.log | head -8
    done
    el "tests"
    ;;
  matmul)
    for set in "2048:1536,1536:1536,17920:1536,1536:8960" "12288:2048,2048:6144"; do
      wg_over && { fail "time budget: matmul $set not run"; continue; }
      n=matmul_$(echo $set | tr ':,' '_-')
      timeout 240 $B bench matmul --type q4_K --shapes $set --tokens 512,4096 --no-per-row --tiles "" --int8 --coop \
        ${COOP_TILES:+--coop-tiles $COOP_TILES} --reps 5 --json $R/$n.json > $R/$n.txt 2>&1 || fail "$n (exit $?)"
      grep -E "all|coop|auto" $R/$n.txt | tail -24
    done
    # the fastest coop tile over both shape sets at T = 4096 ("all" rows), for COOP_EXTRA=auto
    python3 - $R > $R/coop_best_tile.txt <<'PY' || true
import glob, json, sys
tot = {}
for f in glob.glob(sys.argv[1] + "/matmul_*.json"):
    for r in json.load(open(f))["results"]:
        if r.get("shapes") == "all" and r["T"] == 4096 and r["variant"].startswith("coop "):
            tot[r["variant"][5:]] = tot.get(r["variant"][5:], 0) + r["median_us"]
if tot:
    print(min(tot, key=tot.get))
PY
    echo "fastest coop tile at 4096: $(cat $R/coop_best_tile.txt)"
    el "matmul"
    ;;
  ttft)
    if [ "${COOP_EXTRA:-auto}" = auto ]; then
      COOP_EXTRA=""
      bt=$(cat $R/coop_best_tile.txt 2>/dev/null)
      [ -n "$bt" ] && [ "$bt" != 64x64 ] && COOP_EXTRA="--matmul-coop-tile-n ${bt%x*} --matmul-coop-tile-t ${bt#*x}"
    fi
    wg_synth_begin ${TTFT_MODELS:-qwen25-1.5b qwen35-2b}
    for m in ${TTFT_MODELS:-qwen25-1.5b qwen35-2b}; do
      for n in ${TTFT_LENGTHS:-4096 512}; do
        A="bench -m ${WG_SYNTH[$m]} --prompt-lengths $n --gen 8 --reps 2"
        wg_ab coop_${m}_$n 200 --a "$A" --b "$A --matmul-coop" --metric ttft_ms --rounds 2
        [ -n "${COOP_EXTRA:-}" ] && [ $n = 4096 ] && wg_ab coopx_${m}_$n 200 --a "$A --matmul-coop" \
          --b "$A --matmul-coop $COOP_EXTRA" --metric ttft_ms --rounds 2
      done
    done
    el "ttft"
    ;;
  decode)
    wg_synth_begin qwen25-1.5b
    D="bench -m ${WG_SYNTH[qwen25-1.5b]} --prompt-lengths 512 --gen 256 --reps 3"
    wg_ab decode_ctl 200 --a "$D" --b "$D --matmul-coop" --metric decode_ms_p50,decode_tok_s --rounds 2
    el "decode"
    ;;
  *) fail "unknown part $part" ;;
  esac
done
