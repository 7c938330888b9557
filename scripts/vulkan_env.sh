#!/usr/bin/env bash
# Prints the Vulkan loader environment for this machine, as VAR=value words for `env`.
# - A machine with a GPU device node (/dev/nvidia*, /dev/dri) uses its installed driver: nothing.
# - A CPU-only machine gets VK_DRIVER_FILES pointing at a software Vulkan driver, so tests and the
#   demo run the same WebGPU code path everywhere: Mesa 25 lavapipe unpacked by scripts/setup.sh
#   into the cache (with LD_LIBRARY_PATH for its newer libdrm), else SwiftShader from Debian's
#   chromium package.
# - An explicit VK_DRIVER_FILES / VK_ICD_FILENAMES in the caller's environment is kept.
# The Vulkan loader's WSI layers complain loudly when XDG_RUNTIME_DIR is unset (headless CI).
[ -z "${XDG_RUNTIME_DIR:-}" ] && printf 'XDG_RUNTIME_DIR=/tmp '
[ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && exit 0
ls /dev/nvidia0 /dev/dri/renderD* >/dev/null 2>&1 && exit 0
CACHE="${WGLLM_CACHE:-$HOME/.cache/wgllm}"
if [ -f "$CACHE/lavapipe/lvp_icd.json" ]; then
  echo "VK_DRIVER_FILES=$CACHE/lavapipe/lvp_icd.json LD_LIBRARY_PATH=$CACHE/lavapipe/root/usr/lib/x86_64-linux-gnu"
elif [ -f /usr/lib/chromium/vk_swiftshader_icd.json ]; then
  echo "VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json"
fi
exit 0
