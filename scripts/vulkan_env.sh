#!/usr/bin/env bash
# Prints the Vulkan loader environment for this machine: nothing when a hardware driver is
# installed (system ICD files), otherwise VK_DRIVER_FILES pointing at SwiftShader (software Vulkan,
# shipped in Debian's chromium package), so CPU-only machines run the same WebGPU code path.
# The Vulkan loader's WSI layers complain loudly when XDG_RUNTIME_DIR is unset (headless CI).
[ -z "${XDG_RUNTIME_DIR:-}" ] && printf 'XDG_RUNTIME_DIR=/tmp '
for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d; do
  ls "$d"/*.json >/dev/null 2>&1 && exit 0
done
[ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && exit 0
[ -f /usr/lib/chromium/vk_swiftshader_icd.json ] && echo "VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json"
exit 0
