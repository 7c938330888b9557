#!/bin/bash
# Stages Debian's chromium for the device machine (Ubuntu 24.04: no GTK, NSS, GLib, fonts, Node):
#   1. `apt-get download`s chromium, chromium-common and the Debian packages of every library the
#      browser, its bundled .so files and NSS load (from ldd here, plus the dlopened NSS modules),
#      fontconfig and one font: generous, so that only glibc / libstdc++ / libgcc (newer on
#      Ubuntu 24.04) come from the device;
#   2. unpacks them (dpkg -x) into one prefix;
#   3. packs the prefix as tar.xz in parts of at most PART_MIB MiB (default 36: one device call
#      carries 64 MiB including the ~25 MiB working tree) into $OUT_DIR (default .carry/chromium),
#      with SHA256SUMS. tools/device/browser/run_chromium.sh joins and unpacks them on the device.
# Usage: tools/device/browser/stage_chromium.sh [OUT_DIR]   (env: PART_MIB, DEB_CACHE, WHAT, XZ_LEVEL (6))
# WHAT=xvfb stages the X virtual framebuffer instead (Xvfb, xkbcomp and the keyboard data, into
# .carry/xvfb/xvfb.tar.xz.part*): a headed Chromium on an X display, whose Vulkan surface
# extensions (VK_KHR_xcb_surface) the NVIDIA ICD has, unlike the headless platform's. With it Mesa's
# software DRI driver (swrast_dri.so and its LLVM), without which Xvfb offers no GLX extension at
# all, and glxinfo: the device notes say GLX windows on a carried Xvfb + Mesa render on the NVIDIA
# GPU with __GLX_VENDOR_LIBRARY_NAME=nvidia (the client side is NVIDIA's libGLX), the one GL path
# a Chromium GPU process could take there.
# Needs: apt-get (network to the Debian mirror), dpkg, xz; chromium (or xvfb) installed here (for ldd).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
WHAT=${WHAT:-chromium}
OUT_DIR=${1:-$ROOT/.carry/$WHAT}
PART_MIB=${PART_MIB:-36}
DEB_CACHE=${DEB_CACHE:-${WGLLM_CACHE:-$HOME/.cache/wgllm}/chromium-debs}
CHR=/usr/lib/chromium
if [ "$WHAT" = xvfb ]; then
  [ -x /usr/bin/Xvfb ] || { echo "stage_chromium: Xvfb not installed here (apt-get install xvfb x11-xkb-utils)"; exit 1; }
  [ -f /usr/lib/x86_64-linux-gnu/dri/swrast_dri.so ] && [ -x /usr/bin/glxinfo ] \
    || { echo "stage_chromium: Mesa's DRI drivers or glxinfo not installed here (apt-get install libgl1-mesa-dri mesa-utils)"; exit 1; }
  bins="/usr/bin/Xvfb /usr/bin/xkbcomp /usr/bin/glxinfo /usr/lib/x86_64-linux-gnu/dri/swrast_dri.so"
  roots="xvfb x11-xkb-utils xkb-data libgl1-mesa-dri libglx-mesa0 libglapi-mesa mesa-utils mesa-utils-bin"
else
  [ -x $CHR/chromium ] || { echo "stage_chromium: $CHR/chromium not installed here (apt-get install chromium)"; exit 1; }
  bins="$CHR/chromium $CHR/chrome_crashpad_handler $CHR/*.so /usr/lib/x86_64-linux-gnu/libsoftokn3.so
        /usr/lib/x86_64-linux-gnu/libfreeblpriv3.so /usr/lib/x86_64-linux-gnu/nss/*.so"
  roots="chromium chromium-common libnss3 libnspr4 libvulkan1 fontconfig-config fonts-dejavu-core libfontconfig1"
fi

# Packages owning the libraries the binaries link (resolved here), minus the C/C++ runtime.
libs=$(for f in $bins; do [ -e "$f" ] && ldd "$f" 2>/dev/null; done | awk '/=>/{print $3}' | sort -u)
pkgs=$(for l in $libs; do dpkg -S "$(readlink -f "$l")" 2>/dev/null || dpkg -S "$l" 2>/dev/null || true; done \
       | cut -d: -f1 | sort -u | grep -vxE 'libc6|libgcc-s1|libstdc\+\+6' || true)
pkgs="$roots $pkgs"
pkgs=$(echo $pkgs | tr ' ' '\n' | sort -u)
echo "[stage_chromium] $(echo "$pkgs" | wc -l) packages: $(echo $pkgs)"

mkdir -p "$DEB_CACHE"
( cd "$DEB_CACHE" && for p in $pkgs; do ls ${p}_*.deb >/dev/null 2>&1 || echo $p; done | xargs -r apt-get download 2>&1 | grep -v "^W: Download is performed unsandboxed" || true )

PREFIX=$(mktemp -d /tmp/chromium-prefix.XXXXXX)
trap 'rm -rf "$PREFIX"' EXIT
for p in $pkgs; do
  deb=$(ls -t "$DEB_CACHE"/${p}_*.deb 2>/dev/null | head -1)
  [ -n "$deb" ] || { echo "[stage_chromium] no .deb for $p"; exit 1; }
  dpkg -x "$deb" "$PREFIX"
done
# What the browser needs at run time only: drop documentation, man pages, other locales' UI strings.
rm -rf "$PREFIX"/usr/share/{doc,man,info,lintian,bug,menu,applications,icons,pixmaps,gnome-control-center}
find "$PREFIX"/usr/lib/chromium/locales -name '*.pak' ! -name 'en-US.pak' -delete 2>/dev/null || true
# Xvfb loads only the software driver (the others are hard links of the same file: no bytes saved,
# but no hardware driver is offered to load).
find "$PREFIX"/usr/lib/x86_64-linux-gnu/dri -name '*_dri.so' ! -name swrast_dri.so -delete 2>/dev/null || true
echo "[stage_chromium] prefix: $(du -sm "$PREFIX" | cut -f1) MiB unpacked"

rm -rf "$OUT_DIR"
mkdir -p "$OUT_DIR"
tar -C "$PREFIX" -cf - . | xz -T2 -${XZ_LEVEL:-6} -c | split -b ${PART_MIB}M -d -a 2 - "$OUT_DIR/$WHAT.tar.xz.part"
( cd "$OUT_DIR" && sha256sum $WHAT.tar.xz.part* > SHA256SUMS && cat $WHAT.tar.xz.part* | sha256sum | sed "s/-\$/$WHAT.tar.xz/" >> SHA256SUMS )
echo "$pkgs" > "$OUT_DIR/PACKAGES"
ls -la "$OUT_DIR"
echo "[stage_chromium] $(ls "$OUT_DIR"/$WHAT.tar.xz.part* | wc -l) parts of <= $PART_MIB MiB in $OUT_DIR"
