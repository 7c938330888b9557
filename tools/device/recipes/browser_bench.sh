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
#   STAGE=adapter: only the adapter check (seconds) once chromium is complete.
# Output ($OUT): native_run.txt, native_bench.json, browser/{adapter,result,run}.json, browser/chromium.log.
set -u
source tools/device/remote.sh
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
P=$W/chromium-parts
mkdir -p $P
cp .carry/chromium/* $P/ 2>/dev/null
[ -d .carry/xvfb ] && mkdir -p $W/xvfb-parts && cp .carry/xvfb/* $W/xvfb-parts/
[ -d build-wasm/web ] && mkdir -p $W/wasm && cp build-wasm/web/wgllm.* $W/wasm/
have=$(ls $P/chromium.tar.xz.part* 2>/dev/null | wc -l); need=$(grep -c part $P/SHA256SUMS 2>/dev/null || echo '?')
el "chromium: $have of $need parts; wasm: $(ls $W/wasm 2>/dev/null | tr '\n' ' ')"
[ "$have" = "$need" ] || exit 0
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
)
# The full bench runs with BROWSER_VARIANT (a name above; default: the first).
variant() {  # name -> sets GPU_FLAGS, ICD_EXTRA
  local v; for v in "${VARIANTS[@]}"; do
    IFS='|' read -r n f i x <<< "$v"
    [ "$n" = "$1" ] || continue
    export GPU_FLAGS="$f" ICD_EXTRA=${i:+$SWS} XVFB=${x:+$W/xvfb-parts}
    [ -n "$i" ] || unset ICD_EXTRA; [ -n "$x" ] || unset XVFB
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
      OUT=$d tools/device/browser/run_chromium.sh --parts $P --adapter-only --timeout 40 2>&1 | grep -a "adapter:\|status:" | grep -v CONSOLE | cut -c1-300
      grep -a -i -E "angle|egl|vulkan|webgpu|dawn|gpu_process|gpu process|viz_main|software|swiftshader|gl_|adapter|blocklist|feature" $d/chromium.log | grep -a -v -i -E "font|dbus" | cut -c1-300 | head -60
    } > $OUT/browser/$n.txt 2>&1
    sed -n 2,3p $OUT/browser/$n.txt | cut -c1-200
  done
  exit
fi
variant ${BROWSER_VARIANT:-vulkan} || exit 1
# SYNTH=1: SmolLM2's exact shapes and quant types with random weights, written here from the carried
# header (.carry/synth/smollm2.hdr.gz; the text is noise, the speed is real), instead of the 3-call model carry.
if [ "${SYNTH:-0}" = 1 ]; then wg_synth smollm2 || exit 1; GGUF=${WG_SYNTH[smollm2]}
else GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 0; fi
[ -f $W/wasm/wgllm.wasm ] || { el "build-wasm/web not carried yet"; exit 0; }
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
wg_gpu_check
PROMPT="Write a short story about a robot who learns to paint."
el "native greedy"
$B run -m $GGUF -p "$PROMPT" -n 32 --ignore-eos -c 4232 --print-ids > $OUT/native_run.txt 2>&1
el "native bench"
$B bench -m $GGUF --prompt-lengths 512,4096 --gen 128 --reps 3 --json $OUT/native_bench.json > $OUT/native_bench.log 2>&1
el "browser bench"
OUT=$OUT/browser tools/device/browser/run_chromium.sh --parts $P --model $GGUF --wasm-dir $W/wasm \
  --text $W/text/package/moby-dick/data/data.txt --lengths 512,4096 --gen 128 --reps 3 --timeout 420
grep token_ids $OUT/native_run.txt
python3 - $OUT <<'PY'
import json, sys, os
o = sys.argv[1]
nat = json.load(open(os.path.join(o, "native_bench.json")))
br = json.load(open(os.path.join(o, "browser", "result.json")))
ids = [l for l in open(os.path.join(o, "native_run.txt")) if l.startswith("token_ids:")]
nat_ids = json.loads(ids[0].split(":", 1)[1]) if ids else None
rows = {r["n_prompt"]: r for r in nat.get("runs", [])}  # wgllm bench --json: "runs"
print("adapter:", {k: br.get("adapter", {}).get(k) for k in ("vendor", "architecture", "description", "isFallbackAdapter")})
print("greedy tokens equal:", nat_ids == (br.get("greedy") or {}).get("token_ids"))
for r in (br.get("bench") or {}).get("rows", []):
    n = rows.get(r["n_prompt"], {})
    print(f"P={r['n_prompt']}: TTFT browser {r['ttft_ms_median']:.2f} ms vs native {n.get('ttft_ms_median', float('nan')):.2f} ms; "
          f"decode browser {r['decode_tok_s_median']:.1f} vs native {n.get('decode_tok_s_median', float('nan'))} tok/s")
PY
el done
