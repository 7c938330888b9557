#!/usr/bin/env bash
# Continuous batching on the H200: `wgllm serve` (SmolLM2-135M-Instruct Q4_1, --parallel 64,
# context 1024 per slot) measured by `wgllm bench serve` at concurrency 1, 4, 16, 64 (2 x
# concurrency requests per level, 128 tokens each, end of generation ignored), once batched (the
# default: one forward over all active slots) and once with --no-batch (the slots take turns).
# Staging (here): python3 tools/device/pack.py --bin wgllm --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf
# then the planned calls back to back: `bash tools/device/recipes/serve_batch.sh store` for every
# call but the last, `bash tools/device/recipes/serve_batch.sh measure` last. Results: results.tgz
# (bench_serve_{batch,nobatch}.json rows per level, the servers' logs and /metrics).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -4; exit 0; }
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
R=$W/res; rm -rf $R; mkdir -p $R
wg_gpu_check | tee $R/gpu.txt
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
for mode in batch nobatch; do
  extra=""; [ $mode = nobatch ] && extra="--no-batch"
  $B serve -m "$GGUF" --port 18080 --parallel 64 -c 1024 $extra > $R/serve_$mode.log 2>&1 &
  SP=$!
  for i in $(seq 1 180); do grep -q listening $R/serve_$mode.log && break; sleep 1; done
  timeout 240 $B bench serve --url http://127.0.0.1:18080 --concurrency 1,4,16,64 --max-tokens 128 --prompt-words 32 \
    --json $R/bench_serve_$mode.json > $R/bench_serve_$mode.txt 2>&1
  echo "[$mode] bench exit $?"
  (exec 3<>/dev/tcp/127.0.0.1/18080 && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3) > $R/metrics_$mode.txt 2>/dev/null
  kill $SP; wait $SP
  cat $R/bench_serve_$mode.txt
done
