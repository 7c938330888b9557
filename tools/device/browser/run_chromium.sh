#!/bin/bash
# Runs the browser bench (web/bench.html) in the carried Debian chromium, headless, with WebGPU on
# Vulkan, against tools/device/browser/serve_bench.py (Python: the device has no Node), and prints
# the WebGPU adapter the page got (vendor/architecture/description: the NVIDIA GPU or SwiftShader?)
# and the bench result. Files written to $OUT (default /tmp/wgllm-browser): adapter.json,
# result.json, chromium.log, run.json (command, versions, exit status).
# Usage (repo root): tools/device/browser/run_chromium.sh [--model PATH] [--wasm-dir DIR]
#   [--lengths 512,4096] [--gen 128] [--reps 3] [--text FILE] [--timeout S] [--adapter-only]
#   [--load-only | --greedy-only: stop after the load / after the GREEDY greedy tokens (no bench)]
#   [--parts DIR (.carry/chromium)] [--prefix DIR (/root/chromium)] [--chromium BIN]
#   [--glx-only: with XVFB and GLX_VENDOR, start Xvfb, write glxinfo.txt and stop: no Chromium needed]
# Env: XVFB (a directory holding xvfb.tar.xz.part* from `WHAT=xvfb stage_chromium.sh`: Chromium runs
# headed on an Xvfb display instead of --headless=new, so that Chrome's and ANGLE's Vulkan use the
# X11 surface extensions, which the NVIDIA ICD has, rather than VK_EXT_headless_surface, which it
# lacks; the parts also hold Mesa's swrast_dri.so, which Xvfb needs to offer GLX at all, and glxinfo),
# GLX_VENDOR (with XVFB: the glvnd GLX vendor the browser's GL takes, __GLX_VENDOR_LIBRARY_NAME, e.g.
# nvidia: NVIDIA's libGLX on the Mesa Xvfb; glxinfo -B with it is written to glxinfo.txt), GPU_FLAGS (the GPU part of the flags; default: Vulkan for ANGLE and compositing, see FLAGS),
# EXTRA_CHROMIUM_FLAGS (appended to the flags), ICD_EXTRA (more Vulkan ICD manifests, ':'-separated,
# appended to VK_DRIVER_FILES: e.g. the carried SwiftShader ICD, whose instance extensions
# (VK_KHR_surface, VK_KHR_xcb_surface) the headless NVIDIA ICD lacks), PORT (8765), OUT, GREEDY (32).
# Without --chromium, the parts made by stage_chromium.sh are checked, joined and unpacked into
# --prefix once (skipped when the prefix already holds chromium). Vulkan: VK_DRIVER_FILES is set to
# the NVIDIA ICD when it exists (the device), else left as the caller set it (SwiftShader/lavapipe).
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PARTS=$ROOT/.carry/chromium PREFIX=/root/chromium CHROMIUM= MODEL= WASM=$ROOT/build-wasm/web
LENGTHS=512,4096 GEN=128 REPS=3 TEXT= TIMEOUT=480 ADAPTER_ONLY=0 GLX_ONLY=0 STOP_AFTER= OUT=${OUT:-/tmp/wgllm-browser} PORT=${PORT:-8765}
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift 2;; --wasm-dir) WASM=$2; shift 2;; --lengths) LENGTHS=$2; shift 2;;
    --gen) GEN=$2; shift 2;; --reps) REPS=$2; shift 2;; --text) TEXT=$2; shift 2;;
    --timeout) TIMEOUT=$2; shift 2;; --adapter-only) ADAPTER_ONLY=1; shift;; --glx-only) GLX_ONLY=1; shift;;
    --load-only) STOP_AFTER=load_only; shift;; --greedy-only) STOP_AFTER=greedy_only; shift;; --parts) PARTS=$2; shift 2;;
    --prefix) PREFIX=$2; shift 2;; --chromium) CHROMIUM=$2; shift 2;; --out) OUT=$2; shift 2;;
    *) echo "run_chromium: unknown option $1"; exit 2;;
  esac
done
mkdir -p "$OUT"
t0=$(date +%s)

if [ -z "$CHROMIUM" ] && [ "$GLX_ONLY" = 0 ]; then
  if [ ! -x "$PREFIX/usr/lib/chromium/chromium" ]; then
    ( cd "$PARTS" && sha256sum -c --quiet <(grep part SHA256SUMS) ) || { echo "run_chromium: parts in $PARTS missing or corrupt"; exit 1; }
    mkdir -p "$PREFIX"
    cat "$PARTS"/chromium.tar.xz.part* | xz -d -T0 | tar -x -C "$PREFIX" || { echo "run_chromium: unpacking failed"; exit 1; }
    echo "[run_chromium] unpacked into $PREFIX in $(( $(date +%s) - t0 )) s ($(du -sm "$PREFIX" | cut -f1) MiB)"
  fi
  CHROMIUM=$PREFIX/usr/lib/chromium/chromium
  export LD_LIBRARY_PATH=$PREFIX/usr/lib/x86_64-linux-gnu:$PREFIX/lib/x86_64-linux-gnu:$PREFIX/usr/lib/x86_64-linux-gnu/pulseaudio:$PREFIX/usr/lib/chromium${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # fontconfig: the carried config and fonts (the device has neither).
  mkdir -p "$OUT/fc"
  cat > "$OUT/fc/fonts.conf" <<FC
<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig><dir>$PREFIX/usr/share/fonts</dir><cachedir>$OUT/fc/cache</cachedir></fontconfig>
FC
  export FONTCONFIG_FILE=$OUT/fc/fonts.conf
  missing=$(ldd "$CHROMIUM" | grep "not found")
  [ -z "$missing" ] || { echo "run_chromium: libraries missing for chromium:"; echo "$missing"; }
fi
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD && unset VK_ICD_FILENAMES
[ -n "${ICD_EXTRA:-}" ] && export VK_DRIVER_FILES=${VK_DRIVER_FILES:+$VK_DRIVER_FILES:}$ICD_EXTRA
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-/tmp}
[ "$GLX_ONLY" = 1 ] || echo "[run_chromium] $("$CHROMIUM" --version 2>/dev/null) | VK_DRIVER_FILES=${VK_DRIVER_FILES:-} | $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"

HEADLESS=--headless=new XVFB_PID=
if [ -n "${XVFB:-}" ]; then
  XP=/root/xvfb
  if [ ! -x $XP/usr/bin/Xvfb ]; then
    mkdir -p $XP && cat "$XVFB"/xvfb.tar.xz.part* | xz -d | tar -x -C $XP || { echo "run_chromium: unpacking Xvfb failed"; exit 1; }
  fi
  [ -e /usr/bin/xkbcomp ] || ln -s $XP/usr/bin/xkbcomp /usr/bin/xkbcomp  # Xvfb runs its keymap compiler from /usr/bin
  # Xvfb loads its GLX driver from the compiled-in DRI path only (no environment override).
  DRI=/usr/lib/x86_64-linux-gnu/dri
  [ -e $DRI/swrast_dri.so ] || [ ! -f $XP$DRI/swrast_dri.so ] || { mkdir -p $DRI && ln -s $XP$DRI/swrast_dri.so $DRI/swrast_dri.so; }
  XLIBS=$XP/usr/lib/x86_64-linux-gnu:$XP/lib/x86_64-linux-gnu
  LD_LIBRARY_PATH=$XLIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    $XP/usr/bin/Xvfb :99 -screen 0 1280x1024x24 -nolisten tcp +extension GLX -xkbdir $XP/usr/share/X11/xkb > "$OUT/xvfb.log" 2>&1 &
  XVFB_PID=$!
  sleep 1
  kill -0 $XVFB_PID 2>/dev/null || { echo "run_chromium: Xvfb did not start:"; tail -5 "$OUT/xvfb.log"; exit 1; }
  export DISPLAY=:99 HEADLESS=
  # The browser's GL client libraries (glvnd's libGLX_mesa for GLX_VENDOR=mesa) after its own.
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$XLIBS
  if [ -n "${GLX_VENDOR:-}" ]; then
    export __GLX_VENDOR_LIBRARY_NAME=$GLX_VENDOR
    # glxinfo from the parts, with the system's glvnd first (NVIDIA's libGLX beside it), then the parts' libraries.
    if [ -x $XP/usr/bin/glxinfo.x86_64-linux-gnu ]; then
      LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$XLIBS timeout 20 $XP/usr/bin/glxinfo.x86_64-linux-gnu -B > "$OUT/glxinfo.txt" 2>&1
      echo "[run_chromium] glxinfo ($GLX_VENDOR): $(grep -aE "OpenGL renderer|Device:|Error|error" "$OUT/glxinfo.txt" | head -2 | tr '\n' ' ')"
    fi
  fi
fi
if [ "$GLX_ONLY" = 1 ]; then
  grep -a GLX "$OUT/xvfb.log" | head -5
  kill $XVFB_PID 2>/dev/null; wait 2>/dev/null
  exit 0
fi
rm -f "$OUT/result.json" "$OUT/adapter.json"
MODELS_DIR=$(dirname "${MODEL:-$ROOT/x}")
python3 "$ROOT/tools/device/browser/serve_bench.py" --port "$PORT" --wasm-dir "$WASM" --models-dir "$MODELS_DIR" \
  --out "$OUT" ${TEXT:+--text "$TEXT"} --exit-after-result > "$OUT/server.log" 2>&1 &
SERVER=$!
sleep 1
URL="http://127.0.0.1:$PORT/bench.html?post=1&lengths=$LENGTHS&gen=$GEN&reps=$REPS&greedy=${GREEDY:-32}"
[ -n "$MODEL" ] && URL="$URL&model=/models/$(basename "$MODEL")"
[ "$ADAPTER_ONLY" = 1 ] && URL="$URL&adapter_only=1"
[ -n "$STOP_AFTER" ] && URL="$URL&$STOP_AFTER=1"
PROFILE=$(mktemp -d /tmp/chromium-profile.XXXXXX)
GPU_FLAGS=${GPU_FLAGS---enable-features=Vulkan --use-vulkan=native --use-angle=vulkan}
FLAGS=($HEADLESS --no-sandbox --enable-unsafe-webgpu $GPU_FLAGS
  --ignore-gpu-blocklist --disable-gpu-watchdog --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --disable-quic --disable-dev-shm-usage --user-data-dir="$PROFILE"
  --enable-logging=stderr --v=0 --window-size=800,600 ${EXTRA_CHROMIUM_FLAGS:-})
echo "[run_chromium] $CHROMIUM ${FLAGS[*]} $URL" | tee "$OUT/command.txt"
"$CHROMIUM" "${FLAGS[@]}" "$URL" > "$OUT/chromium.log" 2>&1 &
BROWSER=$!
status=timeout
for ((i = 0; i < TIMEOUT * 2; ++i)); do
  [ -f "$OUT/result.json" ] && { status=done; break; }
  kill -0 $BROWSER 2>/dev/null || { status=browser_exited; break; }
  sleep 0.5
done
kill $BROWSER 2>/dev/null; sleep 1; kill -9 $BROWSER 2>/dev/null
kill $SERVER $XVFB_PID 2>/dev/null
wait 2>/dev/null
rm -rf "$PROFILE"

echo "[run_chromium] status: $status after $(( $(date +%s) - t0 )) s"
echo "[run_chromium] adapter: $(cat "$OUT/adapter.json" 2>/dev/null | python3 -c 'import json,sys; a=json.load(sys.stdin); print({k: a.get(k) for k in ("vendor","architecture","device","description","isFallbackAdapter","subgroupMinSize","subgroupMaxSize","features","error")})' 2>/dev/null || echo none)"
echo "[run_chromium] GPU lines of the browser log:"
grep -aiE "vulkan|webgpu|dawn|gpu_init|adapter|swiftshader|nvidia" "$OUT/chromium.log" | grep -viE "font|dbus" | head -20
if [ -f "$OUT/result.json" ]; then
  python3 - "$OUT/result.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("error"): print("[run_chromium] page error:", r.get("kind"), r["error"])
if r.get("greedy"): print("[run_chromium] greedy tokens:", r["greedy"]["token_ids"])
if r.get("load"): print("[run_chromium] load: %.0f ms, heap %s B, file %s B" % (r["load"]["load_ms"], r["load"].get("heap_bytes"), r["load"].get("file_bytes")))
for row in (r.get("bench") or {}).get("rows", []):
    print("[run_chromium] P=%d: TTFT %.1f ms (median of %s), decode %.1f tok/s" % (row["n_prompt"], row["ttft_ms_median"], row["ttft_ms"], row["decode_tok_s_median"]))
PY
else
  echo "[run_chromium] no result; last lines of the browser log:"; tail -30 "$OUT/chromium.log"
fi
printf '{"status": "%s", "seconds": %d}\n' "$status" $(( $(date +%s) - t0 )) > "$OUT/run.json"
[ "$status" = done ]
