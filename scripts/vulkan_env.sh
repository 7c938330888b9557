#!/usr/bin/env bash
# Prints the Vulkan loader environment for this machine, as VAR=value words for `env`.
# - A machine with a GPU device node (/dev/nvidia*, /dev/dri) uses its installed driver: nothing.
# - A CPU-only machine gets VK_DRIVER_FILES pointing at SwiftShader (software Vulkan shipped in
#   Debian's chromium package), so tests and the demo run the same WebGPU code path everywhere.
# - An explicit VK_DRIVER_FILES / VK_ICD_FILENAMES in the caller's environment is kept.
# The Vulkan loader's WSI layers complain loudly when XDG_RUNTIME_DIR is unset (headless CI).
[ -z "${XDG_RUNTIME_DIR:-}" ] && printf 'XDG_RUNTIME_DIR=/tmp '
[ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && exit 0
ls /dev/nvidia0 /dev/dri/renderD* >/dev/null 2>&1 && exit 0
[ -f /usr/lib/chromium/vk_swiftshader_icd.json ] && echo "VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json"
exit 0
