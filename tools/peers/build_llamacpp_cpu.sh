#!/usr/bin/env bash
# Builds llama.cpp's CPU backend (llama-perplexity, llama-simple, and llama-greedy from
# tools/peers/llama_greedy.cpp) from the PyPI sdist llama-cpp-python 0.3.36, for the agreement
# test with llama.cpp on real GGUFs (tests/e2e/llamacpp_agreement_test.cpp; issue 13 item 3).
#   tools/peers/build_llamacpp_cpu.sh [JOBS]   -> prints the bin folder
# Cached: $CACHE/llamacpp-cpu-0.3.36-<cpu>/bin (CACHE = $WGLLM_CACHE or ~/.cache/wgllm) with a
# stamp naming the sdist checksum, the greedy tool's checksum and this machine's CPU flags
# (GGML_NATIVE=ON: the build is for the CPU it runs on); a second run with the stamp in place
# only prints the folder. The sdist is fetched with pip into $CACHE/downloads (sha256 checked);
# LCPP_SRC_TGZ=.carry/llama.cpp.tgz uses that tarball of the same source instead (device machine).
# Time: 37 min measured on 2 shared cores under load ~15 (2026-12-02; fewer on idle cores); build tree
# in $LCPP_CPU_WORK (default /tmp/lcpp-cpu), removed afterwards unless KEEP_WORK=1.
set -euo pipefail
JOBS=${1:-2}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${WGLLM_CACHE:-$HOME/.cache/wgllm}"
VER=0.3.36
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SDIST="$CACHE/downloads/llama_cpp_python-$VER.tar.gz"
CPU_TAG=$(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-10)
DEST="$CACHE/llamacpp-cpu-$VER-$CPU_TAG"
GREEDY_SHA=$(sha256sum "$ROOT/tools/peers/llama_greedy.cpp" | cut -c1-16)
STAMP="$DEST/.stamp-$VER-$GREEDY_SHA"
WORK=${LCPP_CPU_WORK:-/tmp/lcpp-cpu}
log() { printf '[lcpp-cpu] %s\n' "$*" >&2; }

if [ -f "$STAMP" ]; then echo "$DEST/bin"; exit 0; fi

rm -rf "$WORK"; mkdir -p "$WORK"
if [ -n "${LCPP_SRC_TGZ:-}" ]; then
  # The device machine (no registry access): the same source as tools/device/pack.py stages it
  # (.carry/llama.cpp.tgz: the sdist's vendor/llama.cpp folder).
  tar xzf "$LCPP_SRC_TGZ" -C "$WORK"
  SRC="$WORK/llama.cpp"
else
  mkdir -p "$CACHE/downloads"
  if [ ! -f "$SDIST" ]; then
    log "fetching llama-cpp-python==$VER (sdist) from PyPI"
    python3 -m pip download --no-deps --no-binary=:all: -d "$CACHE/downloads" "llama-cpp-python==$VER" >&2
  fi
  echo "$SHA  $SDIST" | sha256sum -c - >&2
  tar xzf "$SDIST" -C "$WORK" "llama_cpp_python-$VER/vendor/llama.cpp"
  SRC="$WORK/llama_cpp_python-$VER/vendor/llama.cpp"
fi
log "configuring (CPU backend, static, native)"
cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=ON \
  -DLLAMA_BUILD_TOOLS=ON -DGGML_VULKAN=OFF -DGGML_CUDA=OFF > "$WORK/configure.log"
log "building llama-perplexity llama-simple with $JOBS jobs"
T0=$(date +%s)
nice -n 10 cmake --build "$WORK/build" -j "$JOBS" --target llama-perplexity llama-simple >&2
# llama-greedy: one file against the static libraries just built.
mapfile -t LIBS < <(find "$WORK/build" -name 'libllama.a' -o -name 'libggml*.a' | sort -r)
nice -n 10 g++ -O2 -std=c++17 -I "$SRC/include" -I "$SRC/ggml/include" "$ROOT/tools/peers/llama_greedy.cpp" \
  -Wl,--start-group "${LIBS[@]}" -Wl,--end-group -fopenmp -lpthread -ldl -o "$WORK/build/bin/llama-greedy"
log "built in $(( $(date +%s) - T0 )) s"
rm -rf "$DEST"; mkdir -p "$DEST/bin"
cp "$WORK/build/bin/"{llama-perplexity,llama-simple,llama-greedy} "$DEST/bin/"
[ "${KEEP_WORK:-0}" = 1 ] || rm -rf "$WORK"
touch "$STAMP"
echo "$DEST/bin"
