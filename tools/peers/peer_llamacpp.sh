#!/usr/bin/env bash
# Peer measurement: llama.cpp's llama-bench on the same GGUF, printed as one JSON line with the
# same keys as `wgllm bench` (for `wgllm bench ab --b-cmd`).
#   tools/peers/peer_llamacpp.sh LLAMA_BENCH MODEL N_PROMPT N_GEN [extra llama-bench args]
# ttft_ms   = n_prompt / (prompt-processing tokens/s)   (llama-bench pp test)
# decode_tok_s = text-generation tokens/s at depth n_prompt (llama-bench tg test with -d)
set -euo pipefail
LB=$1 MODEL=$2 P=$3 N=$4
shift 4
out=$("$LB" -m "$MODEL" -p "$P" -n "$N" -d 0 -r 1 -o json "$@" 2>/dev/null)
pp=$(echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print([x["avg_ts"] for x in r if x["n_prompt"]>0][0])')
tg_out=$("$LB" -m "$MODEL" -p 0 -n "$N" -d "$P" -r 1 -o json "$@" 2>/dev/null)
tg=$(echo "$tg_out" | python3 -c 'import json,sys; r=json.load(sys.stdin); print([x["avg_ts"] for x in r if x["n_gen"]>0][0])')
python3 -c "import json; print(json.dumps({'engine':'llama.cpp','ttft_ms': $P/$pp*1000.0, 'decode_tok_s': $tg}))"
