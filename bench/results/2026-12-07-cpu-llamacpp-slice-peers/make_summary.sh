#!/usr/bin/env bash
# summary.json of this folder (run from the repository root).
D=bench/results/2026-12-07-cpu-llamacpp-slice-peers
python3 tools/device/recipes/real_models_summary.py $D/raw --commit "$(cat $D/commit.txt)" --device "CPU-only development machine, 2 cores (the CPU backends of wgllm and llama.cpp)" \
  --peer qwen25-1.5b=$D/raw/llama_perplexity_qwen25-1.5b.log --peer gemma3-270m=$D/raw/llama_perplexity_gemma3-270m.log
