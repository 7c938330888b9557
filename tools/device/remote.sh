# Sourced at the start of every device recipe (bash): stores what this call carried, sets up the
# Vulkan loader and the environment, and joins model slices once all of them have arrived.
# Pieces persist in $W (/root/wg) while the machine stays warm (released ~30 s after a call), so
# the calls planned by tools/device/pack.py must be issued back to back.
#   $W/bin     wgllm and test binaries with their shared libraries (.carry/bin)
#   $W/models  joined models, checked against .carry/models.sha256
# After sourcing: $B (wgllm), $W, wg_model NAME (path of a joined model, or fails), wg_gpu_check
# (prints the GPU's clocks, utilisation and other processes: benchmarks are refused on a busy GPU),
# wg_results (a recipe's results folder and time budget), wg_ab (one `bench ab` within it).
W=/root/wg
mkdir -p $W/bin $W/models $W/parts
if [ -d .gl ]; then for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig; fi
[ -d .carry/bin ] && cp -r .carry/bin/. $W/bin/
for p in .carry/*.part[0-9][0-9]; do [ -f "$p" ] && cp "$p" $W/parts/; done
[ -f .carry/llama.cpp.tgz ] && cp .carry/llama.cpp.tgz $W/
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD
export LD_LIBRARY_PATH=$W/bin:${LD_LIBRARY_PATH:-} WGLLM_CACHE=$W WGLLM_SOURCE_DIR=$PWD XDG_RUNTIME_DIR=/tmp
B=$W/bin/wgllm
mkdir -p "${OUT:-/tmp/out}"
# Joins and checks every model whose slices have all arrived.
if [ -f .carry/models.sha256 ]; then
  while read -r sum name parts; do
    [ -f $W/models/$name ] && continue
    have=$(ls $W/parts/$name.part* 2>/dev/null | wc -l)
    [ "$have" = "$parts" ] || { echo "[remote] $name: $have of $parts slices so far"; continue; }
    cat $(ls $W/parts/$name.part* | sort) > $W/models/$name.tmp
    if echo "$sum  $W/models/$name.tmp" | sha256sum -c --quiet; then
      mv $W/models/$name.tmp $W/models/$name; rm -f $W/parts/$name.part*; echo "[remote] $name joined, sha256 ok"
    else echo "[remote] $name: sha256 mismatch"; rm -f $W/models/$name.tmp; fi
  done < .carry/models.sha256
fi
wg_model() { [ -f "$W/models/$1" ] && echo "$W/models/$1" || { echo "[remote] model $1 missing" >&2; return 1; }; }
wg_gpu_check() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
}
# The default model where the engine looks for it ($WGLLM_CACHE/models).
[ -f $W/models/SmolLM2-135M-Instruct.Q4_1.gguf ] || true
# Synthetic-weight GGUFs of real models' shapes, written here (tools/synth/write_gguf.py --seed 1;
# the text is noise, the speed is real) from the headers carried in .carry/synth (staging:
# `pack.py --extra /tmp/synth=synth`) or from published configs. WG_SYNTH[NAME] is the file;
# `wg_synth NAME...` writes the missing ones (log: $W/synth/write_NAME.txt) and fails naming the first
# that could not be written.
mkdir -p $W/synth
[ -d .carry/synth ] && cp .carry/synth/* $W/synth/
WG_QH=$W/synth/qwen25-coder-1.5b.hdr.gz WG_SH=$W/synth/smollm2.hdr.gz
declare -A WG_SYNTH_SRC=([lfm2-1.2b]="--config tools/synth/configs/lfm2-1.2b.json --vocab $WG_SH"
  [qwen25-1.5b]="--header $WG_QH" [smollm2]="--header $WG_SH"
  [qwen35-0.8b]="--config tools/synth/configs/qwen3.5-0.8b.json --vocab $WG_SH"
  [qwen35-2b]="--config tools/synth/configs/qwen3.5-2b.json --vocab $WG_SH"
  [gemma3-270m]="--config tools/synth/configs/gemma-3-270m.json --vocab $WG_SH")
# Without the real file's header the Qwen2.5 file comes from its published config (same tensors and
# Q4_K_M types; SmolLM2's tokenizer padded to the vocabulary).
[ -f $WG_QH ] || WG_SYNTH_SRC[qwen25-1.5b]="--config tools/synth/configs/qwen2.5-coder-1.5b.json --vocab $WG_SH"
declare -A WG_SYNTH=()
for m in "${!WG_SYNTH_SRC[@]}"; do WG_SYNTH[$m]=$W/synth/$m.synthetic.gguf; done
wg_synth() {
  local m
  for m; do
    [ -n "${WG_SYNTH_SRC[$m]:-}" ] || { echo "[remote] no synthetic model named $m" >&2; return 1; }
    [ -f ${WG_SYNTH[$m]} ] && continue
    python3 tools/synth/write_gguf.py ${WG_SYNTH_SRC[$m]} --seed 1 ${WG_SYNTH[$m]} > $W/synth/write_$m.txt 2>&1 \
      || { echo "[remote] write_gguf.py $m: $(tail -2 $W/synth/write_$m.txt)" >&2; rm -f ${WG_SYNTH[$m]}; return 1; }
  done
}
# The start of a recipe on synthetic files: the GPU check into $R/<gpu file> (default gpu.txt), the
# synthetic-weights label, `wg_synth NAME...` (its errors also into $R/write_errors.txt); exits the
# recipe when a file cannot be written. Usage: wg_synth_begin [--gpu FILE] NAME...
wg_synth_begin() {
  local gpu=gpu.txt
  [ "${1:-}" = --gpu ] && { gpu=$2; shift 2; }
  wg_gpu_check | tee $R/$gpu
  echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $R/LABEL.txt
  wg_synth "$@" 2> >(tee -a $R/write_errors.txt >&2) || { fail "synthetic files $*"; exit 1; }
}
# The prebuilt Vulkan llama-bench (tools/peers/build_llamacpp_vulkan.sh: .carry/llama-vk.tar.xz.partNN) may
# arrive in several calls: unpacked into $W/llama-vk once the parts form a whole xz stream. Sets LB_VK
# (its llama-bench; absent until then) and puts its libgomp on LD_LIBRARY_PATH.
LB_VK=$W/llama-vk/llama-bench
wg_llamacpp_vk() {
  mkdir -p $W/vkparts
  for p in .carry/llama-vk.tar.xz.part*; do [ -f "$p" ] && cp "$p" $W/vkparts/; done
  if ls $W/vkparts/llama-vk.tar.xz.part* > /dev/null 2>&1 && [ ! -x $LB_VK ]; then
    if cat $(ls $W/vkparts/llama-vk.tar.xz.part* | sort) | xz -t 2>/dev/null; then
      cat $(ls $W/vkparts/llama-vk.tar.xz.part* | sort) | xz -d | tar x -C $W && echo "[remote] llama.cpp Vulkan llama-bench unpacked"
    else echo "[remote] llama.cpp Vulkan parts: $(ls $W/vkparts | wc -l) so far, not yet a whole archive"; fi
  fi
  export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$W/llama-vk
}
# Starts the llama.cpp CUDA build from the carried sdist in the background, once per warm machine
# ($W/lcpp.log ends with "BUILD_DONE <rc>"; llama-bench ~5.5 min on 16 cores; a call waits for it to
# end before it returns). Arguments: the targets (default llama-bench; llama-server also configures
# the server without its web UI, which would be downloaded, and without OpenSSL). Sets LB_CUDA and
# LS_CUDA to the llama-bench and llama-server it builds.
LB_CUDA=$W/lcpp/llama.cpp/build/bin/llama-bench
LS_CUDA=$W/lcpp/llama.cpp/build/bin/llama-server
wg_start_llamacpp_cuda() {
  [ -f $W/llama.cpp.tgz ] && [ ! -d $W/lcpp ] || return 0
  local targets="${*:-llama-bench}" server=OFF
  case " $targets " in *" llama-server "*) server=ON ;; esac
  mkdir -p $W/lcpp && tar xzf $W/llama.cpp.tgz -C $W/lcpp
  echo "$targets" > $W/lcpp.targets
  (cd $W/lcpp/llama.cpp && setsid nohup bash -c "cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=$server \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    > $W/lcpp.log 2>&1 && cmake --build build -j 16 --target $targets >> $W/lcpp.log 2>&1; \
    echo BUILD_DONE \$? >> $W/lcpp.log" > /dev/null 2>&1 &)
  echo "[remote] llama.cpp CUDA build started"
}
# Waits for that build until it ends or the call has run $1 seconds (from the recipe's T0, else from
# now; default 500). A failed build (cc1plus has crashed here beside GPU work) is resumed once, in the
# foreground, within the same limit. Returns 0 once the last build ended well.
wg_wait_llamacpp() {
  local limit=${1:-500} t0=${T0:-$(date +%s)}
  while ! grep -q BUILD_DONE $W/lcpp.log 2>/dev/null && [ $(( $(date +%s) - t0 )) -lt $limit ]; do sleep 5; done
  grep BUILD_DONE $W/lcpp.log 2>/dev/null | tail -1 | grep -q "BUILD_DONE 0" && return 0
  grep -q BUILD_DONE $W/lcpp.log 2>/dev/null || return 1
  local left=$(( limit - ($(date +%s) - t0) ))
  (( left > 30 )) || { echo "[remote] llama.cpp build failed; no time left to resume it" >&2; return 1; }
  echo "[remote] llama.cpp build failed: $(grep -m3 -i error $W/lcpp.log | tr '\n' ' '); resuming it (at most ${left} s)" >&2
  (cd $W/lcpp/llama.cpp && timeout $left cmake --build build -j 16 --target $(cat $W/lcpp.targets 2>/dev/null || echo llama-bench) \
     >> $W/lcpp.log 2>&1; echo "BUILD_DONE $?" >> $W/lcpp.log)
  grep BUILD_DONE $W/lcpp.log | tail -1 | grep -q "BUILD_DONE 0"
}
# A recipe's results: T0 (its start), R=$W/res (emptied; packed into $OUT/results.tgz when the script
# exits, which it must do by itself within the call for anything to come back), el MSG (a line with
# the seconds since T0), fail MSG (also appended to $R/FAILED.txt), wg_over (true past BUDGET_S,
# default 500 s), wg_left, wg_step (below).
wg_results() {
  T0=$(date +%s)
  R=$W/res; rm -rf $R; mkdir -p $R
  trap 'tar czf $OUT/results.tgz -C $R .' EXIT
}
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
fail() { echo "FAIL: $*" | tee -a $R/FAILED.txt; }
wg_left() { echo $(( ${BUDGET_S:-500} - ($(date +%s) - T0) )); }  # seconds of BUDGET_S left
wg_over() { (( $(wg_left) < 0 )); }
# wg_step MAX CMD...: CMD under `timeout` min(MAX, seconds left - 10), or skipped (status 1) with under
# 30 s of the budget left, so that the EXIT trap still packs the results within the call.
wg_step() {
  local t=$1; shift
  (( $(wg_left) < 30 )) && { fail "time budget: $* not run"; return 1; }
  (( t > $(wg_left) - 10 )) && t=$(( $(wg_left) - 10 ))
  timeout $t "$@"
}
# wg_ab NAME TIMEOUT ARGS...: `wgllm bench ab ARGS` into $R/NAME.json and $R/NAME.txt, skipped past
# the budget; prints its B/A and noise lines.
wg_ab() {
  local name=$1 t=$2; shift 2
  wg_over && { fail "time budget: $name not run"; return; }
  timeout $t $B bench ab "$@" --json $R/$name.json > $R/$name.txt 2>&1 || fail "$name (exit $?)"
  echo "== $name"; grep -E "B/A|noise" $R/$name.txt | head -6
}
# wg_rounds A B ROUNDS BUDGET_S: ROUNDS interleaved rounds of two measurements (functions taking the
# round number; A first in odd rounds, B first in even ones), no round started past BUDGET_S seconds
# since T0 (the call's limit is 600 s and the results leave on exit).
wg_rounds() {
  local k
  for ((k = 1; k <= $3; ++k)); do
    (( $(date +%s) - T0 > $4 )) && { el "time budget reached: $((k - 1)) rounds"; break; }
    if (( k % 2 )); then $1 $k; $2 $k; else $2 $k; $1 $k; fi
  done
}
# wg_web_summary DIR MODEL: summary.json in DIR by tools/device/summarize.py (browser-build or Dawn-in-Node
# results against native, COMMIT, this GPU), its rows printed.
wg_web_summary() {
  local dev
  dev="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | sed 's/, / (Vulkan, driver /;s/$/)/')"
  python3 tools/device/summarize.py $1 --commit "${COMMIT:-unknown}" --device "$dev" --model $2
  python3 -c "
import json, sys
for r in json.load(open(sys.argv[1]))['rows']:
    print(r['metric'], r['context'], r.get('label', ''), round(r['wgllm'], 3), 'vs', r.get('peer'), r.get('peer_value'), r.get('round_ratios'))" $1/summary.json
}
