#!/usr/bin/env bash
# Builds llama.cpp's llama-bench with the Vulkan backend on this (Debian 12, CPU-only) machine and
# packs it for the H200 device machine (issue 5, peer engines; run there by bench/results/2026-11-29-h200/session2/peers_vulkan/recipe.sh).
#   tools/peers/build_llamacpp_vulkan.sh [JOBS]      -> .carry/llama-vk.tar.xz.part00, part01, ...
# Source: .carry/llama.cpp.tgz (llama.cpp vendored in the PyPI sdist llama-cpp-python 0.3.36).
# Debian 12's Vulkan headers (1.3.239) lack the VK_KHR_cooperative_matrix types ggml-vulkan uses,
# and its glslc (2023.2) cannot compile the cooperative-matrix shaders. Both come from Debian 13
# (trixie) .debs, unpacked into $CACHE/vk-trixie (nothing installed system-wide):
#   libvulkan-dev 1.4.309.0-1 (headers, CMake config), spirv-headers 1.6.1+1.4.309.0-1,
#   glslc + libshaderc1 2025.2-1. Trixie's glslc needs glibc 2.38, so it runs through trixie's own
#   dynamic loader and libc/libstdc++ (a wrapper script), which leaves the host's glibc alone.
# With them ggml-vulkan's configure reports GL_KHR_cooperative_matrix, GL_NV_cooperative_matrix2
# and GL_EXT_integer_dot_product as supported (bfloat16 / fp8 / fp4 shader types are not: glslang
# 15.1 predates them; SmolLM2 Q4_1 does not use them).
# The result is one statically linked llama-bench (ggml and llama inside; it needs libvulkan.so.1,
# libgomp.so.1, glibc >= 2.34 and libstdc++ from GCC >= 12 at run time: libgomp travels along).
# About 25-40 min on 2 cores under nice.
set -euo pipefail
JOBS=${1:-2}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${WGLLM_CACHE:-$HOME/.cache/wgllm}"
SDK=${VK_TRIXIE:-$CACHE/vk-trixie}
WORK=${LCPP_VK_WORK:-/tmp/lcpp-vk}
BUILD=${LCPP_VK_BUILD:-$WORK/build}
log() { printf '[lcpp-vk] %s\n' "$*"; }

# ---- Vulkan headers + glslc from trixie (checksummed .debs)
if [ ! -f "$SDK/.stamp-1.4.309" ]; then
  AP="$CACHE/apt-trixie"; mkdir -p "$AP/lists/partial" "$AP/debs"
  cat > "$AP/trixie.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  A=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$AP" -o "Dir::State::Lists=$AP/lists")
  apt-get "${A[@]}" update -qq
  (cd "$AP/debs" && apt-get "${A[@]}" download glslc=2025.2-1 libshaderc1=2025.2-1 libvulkan-dev=1.4.309.0-1 \
    spirv-headers=1.6.1+1.4.309.0-1 libc6=2.41-12+deb13u5 libstdc++6=14.2.0-19 libgcc-s1=14.2.0-19)
  (cd "$AP/debs" && sha256sum -c <<SUMS)
e05374965709159303041b104d4a26022d6ac5eb8296450364d66ae864a20367  glslc_2025.2-1_amd64.deb
b59b0625cd1a791375d40dab23a4d5d3d0641e3d0a773501becdc3725b7f99cf  libc6_2.41-12+deb13u5_amd64.deb
3c71917b490d1a17aed43196a2787a256ecf060526cdb20216a74bedc061b150  libgcc-s1_14.2.0-19_amd64.deb
2a67c8f784c65e1aa0d251819c020917405b490fbb543c6a73a52a631e476463  libshaderc1_2025.2-1_amd64.deb
ab1fa05837aa7a92aae748fd07a18a35f7d18bb4a71c4724fe2bbf0e32089de0  libstdc++6_14.2.0-19_amd64.deb
8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a  libvulkan-dev_1.4.309.0-1_amd64.deb
dc18db866d63680351c40ac6b6bece34cb52da64a7799ce1cc4f16f6bff4d064  spirv-headers_1.6.1+1.4.309.0-1_all.deb
SUMS
  rm -rf "$SDK"; mkdir -p "$SDK/bin"
  for f in "$AP"/debs/*.deb; do dpkg -x "$f" "$SDK"; done
  L="$SDK/usr/lib/x86_64-linux-gnu"
  printf '#!/bin/sh\nexec %s/ld-linux-x86-64.so.2 --library-path %s %s/usr/bin/glslc "$@"\n' "$L" "$L" "$SDK" > "$SDK/bin/glslc"
  chmod +x "$SDK/bin/glslc"
  touch "$SDK/.stamp-1.4.309"
fi
# Link against the host's loader through a folder of its own (never trixie's libc folder).
mkdir -p "$SDK/vklib" && ln -sf /usr/lib/x86_64-linux-gnu/libvulkan.so.1 "$SDK/vklib/libvulkan.so"
"$SDK/bin/glslc" --version | sed -n 1p  # (sed reads it all: head would end glslc by SIGPIPE, which pipefail makes fatal)

# ---- configure + build llama-bench (static), Vulkan on, CUDA off
mkdir -p "$WORK"
[ -d "$WORK/llama.cpp" ] || tar xzf "$ROOT/.carry/llama.cpp.tgz" -C "$WORK"
cmake -S "$WORK/llama.cpp" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGGML_VULKAN=ON -DGGML_NATIVE=OFF \
  -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DCMAKE_SKIP_RPATH=ON -DCMAKE_PREFIX_PATH="$SDK/usr" -DVulkan_INCLUDE_DIR="$SDK/usr/include" \
  -DVulkan_LIBRARY="$SDK/vklib/libvulkan.so" -DVulkan_GLSLC_EXECUTABLE="$SDK/bin/glslc" > "$WORK/configure.log"
grep -E "cooperative_matrix|integer_dot|bfloat16" "$WORK/configure.log" || true
nice -n 19 cmake --build "$BUILD" -j "$JOBS" --target llama-bench

# ---- pack: llama-bench + libgomp, xz, pieces under 30 MB
P="$WORK/pack/llama-vk"; rm -rf "$WORK/pack"; mkdir -p "$P"
cp "$BUILD/bin/llama-bench" "$P/"
strip "$P/llama-bench"
ldd "$P/llama-bench" | awk '/libgomp/ {print $3}' | xargs -r -I{} cp -L {} "$P/"
if readelf -d "$P/llama-bench" | grep -qi runpath; then echo "llama-bench has a RUNPATH" >&2; exit 1; fi
if ldd "$P/llama-bench" | grep -qE "libssl|libcrypto"; then echo "llama-bench links OpenSSL" >&2; exit 1; fi
ldd "$P/llama-bench" | tee "$P/ldd.txt"
rm -f "$ROOT"/.carry/llama-vk.tar.xz.part*
tar -C "$WORK/pack" -cf - llama-vk | xz -T"$JOBS" -6 | split -b 29M -d - "$ROOT/.carry/llama-vk.tar.xz.part"
ls -la "$ROOT"/.carry/llama-vk.tar.xz.part*
