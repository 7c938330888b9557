cd /work/wt/node
M=~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf; WG=~/.cache/wgllm/node-dawn/webgpu/package
E="$(scripts/vulkan_env.sh)"
env $E /work/main/build/wgllm run -m $M -p "Write a short story about a robot who learns to paint." -n 8 --ignore-eos -c 2048 --print-ids > $OUT/native_run.txt 2>&1
for k in 1 2; do
  env $E /work/main/build/wgllm bench -m $M --prompt-lengths 16 --gen 4 --reps 1 --allow-busy --json $OUT/native_bench_r$k.json > $OUT/native_bench_r$k.log 2>&1
  env $E node web/node/bench.mjs --model $M --webgpu $WG --wasm-dir /work/main/build-wasm/web --adapter software --lengths 16 --gen 4 --reps 1 --greedy 8 --native-ids $OUT/native_run.txt --out $OUT/node_result_r$k.json > $OUT/node_r$k.log 2>&1; echo "exit $?" >> $OUT/node_r$k.log
done
echo ALLDONE
