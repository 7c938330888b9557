#!/usr/bin/env bash
# Browser vs native on the H200 (issue 15): Debian's chromium (carried, tools/device/browser/
# stage_chromium.sh) runs web/bench.html headless with WebGPU on Vulkan against the Python server
# (tools/device/browser/serve_bench.py); the native wgllm measures the same model on the same GPU in
# the same call. SmolLM2-135M-Instruct Q4_1, product configuration, prompts of 512 and 4096 tokens.
# Staging (here, in the repo root, after `make build web`):
#   tools/device/browser/stage_chromium.sh                      # .carry/chromium/chromium.tar.xz.partNN
#   python3 tools/device/pack.py --bin wgllm --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# The Vulkan loader needs the glvnd libraries to load NVIDIA's ICD: carry .gl in the call that runs Chromium.
# Calls, back to back (the machine keeps /root/wg only while warm):
#   every call: `bash tools/device/recipes/browser_bench.sh` with carry = one chromium part (plus
#   .carry/chromium/SHA256SUMS) and/or the model slices pack.py planned; the call in which the last
#   piece arrives also carries build-wasm/web and .carry/bin, .gl and runs everything.
#   STAGE=adapter: only the adapter check (seconds) once chromium is complete (ONLY="name ...": those
#   variants); with BENCH_AFTER=1 the full run follows with the first variant that got a hardware adapter.
#   STAGE=glx: once the Xvfb parts are complete, glxinfo on the carried Xvfb with NVIDIA's and Mesa's GLX.
# Full run (BROWSER_VARIANT: a name in VARIANTS; ROUNDS (2) interleaved rounds of the native bench and the
# browser bench, BUDGET_S (300) before the last round starts, BROWSER_TIMEOUT (240 s a browser run), COMMIT):
# $OUT/results.tgz and summary.json (see R below).
set -u
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
P=$W/chromium-parts
mkdir -p $P
cp .carry/chromium/* $P/ 2>/dev/null
[ -d .carry/xvfb ] && mkdir -p $W/xvfb-parts && cp .carry/xvfb/* $W/xvfb-parts/
[ -d build-wasm/web ] && mkdir -p $W/wasm && cp build-wasm/web/wgllm.* $W/wasm/
have=$(ls $P/chromium.tar.xz.part* 2>/dev/null | wc -l); need=$(grep -c part $P/SHA256SUMS 2>/dev/null || echo '?')
xhave=$(ls $W/xvfb-parts/xvfb.tar.xz.part* 2>/dev/null | wc -l); xneed=$(grep -c part $W/xvfb-parts/SHA256SUMS 2>/dev/null || echo 0)
el "chromium: $have of $need parts; xvfb: $xhave of $xneed parts; wasm: $(ls $W/wasm 2>/dev/null | tr '\n' ' ')"
if [ "${STAGE:-}" = glx ]; then
  # Does GLX on the carried Xvfb reach the GPU (NVIDIA's libGLX), before the browser is carried?
  [ "$xneed" != 0 ] && [ "$xhave" = "$xneed" ] || { el "xvfb parts incomplete"; exit 0; }
  mkdir -p $OUT/browser
  for vendor in nvidia mesa; do
    XVFB=$W/xvfb-parts GLX_VENDOR=$vendor OUT=/tmp/glx_$vendor tools/device/browser/run_chromium.sh --glx-only
    cp /tmp/glx_$vendor/glxinfo.txt $OUT/browser/glxinfo_$vendor.txt 2>/dev/null
    head -20 /tmp/glx_$vendor/glxinfo.txt; tail -5 /tmp/glx_$vendor/xvfb.log
  done
  exit 0
fi
[ "$have" = "$need" ] && [ "$xhave" = "$xneed" ] || exit 0
# Ways to start Chromium's GPU process on a headless NVIDIA ICD (2026-12-02: ANGLE on Vulkan failed
# for want of VK_KHR_surface): name|GPU_FLAGS|ICD_EXTRA ("sws" = the carried SwiftShader ICD, whose
# instance extensions include the surface ones; Dawn still enumerates the NVIDIA device); "x" in the
# fourth field: headed on an Xvfb display (tools/device/browser/run_chromium.sh XVFB).
SWS=/root/chromium/usr/lib/chromium/vk_swiftshader_icd.json
VARIANTS=(
  "vulkan|--enable-features=Vulkan --use-vulkan=native --use-angle=vulkan|"
  "gl_swiftshader|--use-angle=swiftshader --enable-unsafe-swiftshader|"
  "disable_gpu|--disable-gpu|"
  "vulkan_icd_union|--enable-features=Vulkan --use-vulkan=native --use-angle=vulkan|sws"
  "egl_headless|--ozone-platform=headless --use-angle=gl-egl|"
  "egl|--use-angle=gl-egl|"
  "use_gl_egl|--ozone-platform=headless --use-gl=egl|"
  "vulkan_headless|--ozone-platform=headless --enable-features=Vulkan,VulkanFromANGLE,DefaultANGLEVulkan --use-vulkan=native --use-angle=vulkan --disable-vulkan-surface|"
  "vulkan_headless_union|--ozone-platform=headless --enable-features=Vulkan,VulkanFromANGLE,DefaultANGLEVulkan --use-vulkan=native --use-angle=vulkan --disable-vulkan-surface|sws"
  "egl_headless_vk|--ozone-platform=headless --use-angle=gl-egl --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface|"
  "egl_headless_vk_union|--ozone-platform=headless --use-angle=gl-egl --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface|sws"
  "egl_headless_adapter_default|--ozone-platform=headless --use-angle=gl-egl --use-webgpu-adapter=default|"
  "gl_swiftshader_vk_union|--use-angle=swiftshader --enable-unsafe-swiftshader --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface|sws"
  "egl_headless_verbose|--ozone-platform=headless --use-angle=gl-egl --vmodule=*gpu_init*=2,*webgpu*=3,*dawn*=3,*gpu_util*=2,*gpu_data_manager*=2,*gpu_feature*=2|"
  "x11_vulkan|--ozone-platform=x11 --enable-features=Vulkan --use-vulkan=native --use-angle=vulkan||x"
  "x11_angle_vulkan|--ozone-platform=x11 --use-angle=vulkan||x"
  "x11_egl|--ozone-platform=x11 --use-angle=gl-egl||x"
  "x11_egl_vulkan|--ozone-platform=x11 --use-angle=gl-egl --enable-features=Vulkan --use-vulkan=native||x"
  "x11_default|--ozone-platform=x11||x"
  # 2026-12-07: Xvfb with Mesa's swrast (so that it offers GLX) and NVIDIA's libGLX on the client side
  # ("xg": GLX_VENDOR=nvidia), the path the device notes say renders GLX windows on the GPU: ANGLE on GL.
  "x11_glx_nv|--ozone-platform=x11 --use-angle=gl||xg"
  "x11_glx_nv_vk|--ozone-platform=x11 --use-angle=gl --enable-features=Vulkan --use-vulkan=native||xg"
  "x11_glx_nv_vk_nosurface|--ozone-platform=x11 --use-angle=gl --enable-features=Vulkan --use-vulkan=native --disable-vulkan-surface||xg"
  "x11_glx_nv_default|--ozone-platform=x11||xg"
  "x11_glx_mesa|--ozone-platform=x11 --use-angle=gl||x"
  "x11_glx_nv_angle_vulkan|--ozone-platform=x11 --enable-features=Vulkan --use-vulkan=native --use-angle=vulkan||xg"
)
# The full bench runs with BROWSER_VARIANT (a name above; default: the first).
variant() {  # name -> sets GPU_FLAGS, ICD_EXTRA
  local v; for v in "${VARIANTS[@]}"; do
    IFS='|' read -r n f i x <<< "$v"
    [ "$n" = "$1" ] || continue
    export GPU_FLAGS="$f" ICD_EXTRA=${i:+$SWS} XVFB=${x:+$W/xvfb-parts} GLX_VENDOR=
    [ -n "$i" ] || unset ICD_EXTRA; [ -n "$x" ] || unset XVFB
    [ "$x" = xg ] && GLX_VENDOR=nvidia
    return 0
  done; echo "browser_bench: no variant $1"; return 1
}
if [ "${STAGE:-}" = adapter ]; then
  # Unpack once (run_chromium does it), then what the Vulkan loader offers with each ICD list.
  mkdir -p $OUT/browser
  OUT=/tmp/unpack tools/device/browser/run_chromium.sh --parts $P --adapter-only --timeout 5 > /dev/null 2>&1
  for icds in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json:$SWS; do
    VK_DRIVER_FILES=$icds LD_LIBRARY_PATH=/root/chromium/usr/lib/x86_64-linux-gnu python3 tools/device/browser/vk_probe.py \
      --lib /root/chromium/usr/lib/x86_64-linux-gnu/libvulkan.so.1 2>&1 | tee -a $OUT/vk_probe.txt
  done
  ls /usr/share/glvnd/egl_vendor.d /usr/local/nvidia/share/glvnd/egl_vendor.d /etc/glvnd/egl_vendor.d 2>&1 | tee $OUT/egl_vendors.txt
  for v in "${VARIANTS[@]}"; do
    n=${v%%|*}; variant $n || continue
    [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $n "* ]] && continue
    el "variant $n"
    # Per variant one small file (the adapter line and the GPU process's log lines), not the whole logs.
    d=/tmp/variant_$n; rm -rf $d
    { echo "GPU_FLAGS=$GPU_FLAGS ICD_EXTRA=${ICD_EXTRA:-}"
      OUT=$d tools/device/browser/run_chromium.sh --parts $P --adapter-only --timeout 40 2>&1 | grep -a "adapter:\|status:\|glxinfo" | grep -v CONSOLE | cut -c1-300
      [ -f $d/glxinfo.txt ] && head -30 $d/glxinfo.txt
      grep -a -i -E "angle|egl|vulkan|webgpu|dawn|gpu_process|gpu process|viz_main|software|swiftshader|gl_|adapter|blocklist|feature" $d/chromium.log | grep -a -v -i -E "font|dbus" | cut -c1-300 | head -60
    } > $OUT/browser/$n.txt 2>&1
    sed -n 2,3p $OUT/browser/$n.txt | cut -c1-200
    # BENCH_AFTER=1: the full run below with the first variant whose page got a hardware adapter.
    if [ "${BENCH_AFTER:-0}" = 1 ] && [ -z "${BROWSER_VARIANT:-}" ] && grep -a "adapter:" $OUT/browser/$n.txt | grep -q "'isFallbackAdapter': False"; then
      BROWSER_VARIANT=$n
      break  # the full run's budget counts from the call's start
    fi
  done
  [ "${BENCH_AFTER:-0}" = 1 ] && [ -n "${BROWSER_VARIANT:-}" ] || exit 0
  el "hardware adapter with $BROWSER_VARIANT: the full run"
fi
variant ${BROWSER_VARIANT:-vulkan} || exit 1
# SYNTH=1: SmolLM2's exact shapes and quant types with random weights, written here from the carried
# header (.carry/synth/smollm2.hdr.gz; the text is noise, the speed is real), instead of the 3-call model carry.
MODEL_NAME=SmolLM2-135M-Instruct-Q4_1
if [ "${SYNTH:-0}" = 1 ]; then wg_synth smollm2 || exit 1; GGUF=${WG_SYNTH[smollm2]} MODEL_NAME=$MODEL_NAME-shaped-synthetic
else GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 0; fi
[ -f $W/wasm/wgllm.wasm ] || { el "build-wasm/web not carried yet"; exit 0; }
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
# Results folder R (packed into $OUT/results.tgz on exit): native_run.txt, native_bench_r<k>.json,
# browser_result_r<k>.json (+ its adapter.json, run.json, command.txt, the browser log's GPU lines),
# gpu.txt, this recipe, summary.json (tools/device/summarize.py: browser vs native per round).
R=$W/res_browser; rm -rf $R; mkdir -p $R
trap 'tar czf $OUT/results.tgz -C $R .; cp $R/summary.json $OUT/ 2>/dev/null' EXIT
wg_gpu_check | tee $R/gpu.txt
cp tools/device/recipes/browser_bench.sh $R/recipe_browser_bench.sh
[ "${SYNTH:-0}" = 1 ] && echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $R/LABEL.txt
echo "BROWSER_VARIANT=${BROWSER_VARIANT:-vulkan} GPU_FLAGS=$GPU_FLAGS GLX_VENDOR=${GLX_VENDOR:-}" > $R/variant.txt
PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
el "native greedy"
$B run -m $GGUF -p "$PROMPT" -n 32 --ignore-eos -c 4232 --print-ids > $R/native_run.txt 2>&1
grep token_ids $R/native_run.txt
native() {
  el "round $1: native bench"
  $B bench -m $GGUF --prompt-lengths 512,4096 --gen 128 --reps 3 --json $R/native_bench_r$1.json > $R/native_bench_r$1.log 2>&1 ||
    { el "native bench failed"; tail -5 $R/native_bench_r$1.log; }
  grep -E "^\|" $R/native_bench_r$1.log | tail -2
}
browser() {
  el "round $1: browser bench"
  local d=/tmp/browser_r$1; rm -rf $d
  OUT=$d tools/device/browser/run_chromium.sh --parts $P --model $GGUF --wasm-dir $W/wasm \
    --text $W/text/package/moby-dick/data/data.txt --lengths 512,4096 --gen 128 --reps 3 --timeout ${BROWSER_TIMEOUT:-240} 2>&1 |
    grep -a "\[run_chromium\]" | grep -v CONSOLE | cut -c1-300 | tee /tmp/browser_r$1_version.txt
  # The page's result labelled as what it is: a browser (Chromium's version), with the adapter it got.
  [ -f $d/result.json ] && python3 - $d/result.json $R/browser_result_r$1.json "$(grep -ao 'Chromium [0-9.]*' /tmp/browser_r$1_version.txt 2>/dev/null | head -1)" "$([ -n "${XVFB:-}" ] && echo "headed on Xvfb" || echo headless)" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["label"] = "browser (%s, %s)" % (sys.argv[3].strip(), sys.argv[4])
r["runtime"] = sys.argv[3].strip()
json.dump(r, open(sys.argv[2], "w"), indent=1)
PY
  for f in adapter.json run.json command.txt glxinfo.txt; do [ -f $d/$f ] && cp $d/$f $R/browser_r$1_$f; done
  grep -a -i -E "vulkan|webgpu|dawn|gpu_init|adapter|nvidia|error" $d/chromium.log | grep -a -v -i -E "font|dbus|CONSOLE" | head -40 > $R/browser_r$1_log.txt
}
wg_rounds native browser ${ROUNDS:-2} ${BUDGET_S:-300}
wg_web_summary $R $MODEL_NAME
el done
