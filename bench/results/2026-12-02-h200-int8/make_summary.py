#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs.
Rows: each switch A/B of `wgllm bench ab` (wgllm = the arm with the switch on, peer "default" =
the arm without it; ratio_ci = on / off), the multi-turn runs (A/B by hand: means of two runs),
and the kernel benches (`bench matvec` GB/s, `bench matmul` share of the FMA peak).
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import json, os, statistics

D = os.path.dirname(os.path.abspath(__file__))
DEVICE = "NVIDIA H200 (Vulkan, driver 580.159.04)"
SYN = {"lfm2-1.2b": "LFM2-1.2B-shaped", "qwen25-1.5b": "Qwen2.5-1.5B-shaped", "smollm2": "SmolLM2-135M-shaped"}
rows = []


def load(p):
    return json.load(open(os.path.join(D, p)))


def ab(path, model, context, config, on_arm, metrics, commit):
    j = load(path)
    for m in metrics:
        x = j["metrics"][m]
        a = statistics.median(x["a1"] + x["a2"])
        b = statistics.median(x["b"])
        r = x["ratio_b_over_a"]
        on, off, ci = (b, a, [r["lo"], r["hi"]]) if on_arm == "b" else (a, b, [1 / r["hi"], 1 / r["lo"]])
        rows.append({"model": model, "weights": "synthetic", "metric": m, "context": context, "wgllm": on,
                     "peer": "default", "peer_value": off, "ratio_ci": ci, "noise_band": x["noise_band"],
                     "config": config, "commit": commit, "source": path})


# 1. --dequant-magic and --matvec-int8 with the f32 kernel's launch shapes (binary 84a2f1b).
for m in ("lfm2-1.2b", "qwen25-1.5b"):
    ab(f"int8_launch_shapes/{m}/ab_nomagic_vs_default.json", SYN[m], "decode after 512, 128 steps", "--dequant-magic",
       "b", ["decode_tok_s", "ttft_ms"], "84a2f1b")
    ab(f"int8_launch_shapes/{m}/ab_default_vs_int8.json", SYN[m], "decode after 512, 128 steps",
       "--matvec-int8 (f32 launch shapes)", "b", ["decode_tok_s", "ttft_ms"], "84a2f1b")
# 2. --matvec-int8 with its own launch shapes, --fuse-qk-norm (binary 56d43d6).
for f, m in (("int8_decode_lfm2", "lfm2-1.2b"), ("int8_decode_qwen", "qwen25-1.5b")):
    ab(f"speed_checks_a/{f}.json", SYN[m], "decode after 512, 128 steps", "--matvec-int8", "b",
       ["decode_tok_s", "ttft_ms"], "56d43d6")
ab("speed_checks_a/fuse_qk_norm_lfm2.json", SYN["lfm2-1.2b"], "decode after 512, 128 steps", "--fuse-qk-norm", "b",
   ["decode_tok_s"], "56d43d6")
# 3. --matmul-int8 TTFT, --attn-chunk control (binary a28bd65).
for m in ("lfm2-1.2b", "qwen25-1.5b"):
    for p in (512, 4096):
        ab(f"speed_checks_b/int8_prefill_{m}_p{p}.json", SYN[m], f"TTFT, prompt {p}", "--matmul-int8", "b",
           ["ttft_ms"], "a28bd65")
ab("speed_checks_b/attn_chunk_control.json", SYN["smollm2"], "cold TTFT, prompts 512 and 4096 (control)",
   "--attn-chunk (then on by default)", "b", ["ttft_ms"], "a28bd65")
# 4. Multi-turn (30 turns of 64 user + 16 reply tokens), A = --no-attn-chunk, B = --attn-chunk.
def turns(p):
    return {x["turn"]: x["ttft_session_ms"] for x in load(p)["turns"]}
arms = {arm: [turns(f"speed_checks_b/multiturn30_{arm}_r{r}.json") for r in (1, 2)] for arm in ("A", "B")}
for metric, f in (("ttft_ms", lambda t: sum(t[k] for k in range(2, 31)) / 29), ("turn30_over_turn2_ratio", lambda t: t[30] / t[2])):
    v = {arm: statistics.mean(f(t) for t in ts) for arm, ts in arms.items()}
    rows.append({"model": SYN["smollm2"], "weights": "synthetic", "metric": metric,
                 "context": "bench multi-turn --turns 30 --session-only, session TTFT (mean of turns 2..30 / ratio), 2 runs per arm",
                 "wgllm": v["B"], "peer": "default", "peer_value": v["A"], "ratio_ci": None, "noise_band": None,
                 "config": "--attn-chunk", "commit": "a28bd65", "source": "speed_checks_b/multiturn30_*.json"})
# 5. Kernel benches: matvec q4_K GB/s, int8 at its launch shape vs the f32 default; matmul q4_K at T = 512.
mv = load("int8_launch_shapes/dequant_shape/matvec_q4_K.json")["results"]
shape_int8 = {(16384, 2048): "32/4/32+int8", (6144, 2048): "32/4/64+int8", (2048, 2048): "32/4/64+int8",
              (2048, 8192): "16/4/128+int8"}
for (N, K), var in shape_int8.items():
    for pro in ("none", "norm", "silu"):
        pick = lambda v: [x for x in mv if (x["N"], x["K"], x["prologue"], x["variant"]) == (N, K, pro, v)][0]
        on, off = pick(var), pick("0/0/0")
        rows.append({"model": f"q4_K {N}x{K} matrix, prologue {pro}", "weights": "synthetic", "metric": "matvec_gb_s",
                     "context": "bench matvec, T = 1, bursts of 256 dependent dispatches", "wgllm": on["GBps"],
                     "peer": "default", "peer_value": off["GBps"], "ratio_ci": None, "noise_band": None,
                     "config": f"--matvec-int8 ({var.split('+')[0]})", "commit": "84a2f1b",
                     "source": "int8_launch_shapes/dequant_shape/matvec_q4_K.json"})
mm = load("speed_checks_b/matmul_int8_q4_K.json")["results"]
for N, K in ((16384, 2048), (2048, 8192)):
    pick = lambda v: [x for x in mm if (x.get("N"), x.get("K"), x["T"]) == (N, K, 512) and x["variant"].startswith(v)][0]
    on, off = pick("tiled auto int8"), pick("tiled auto " + ("6" if K == 2048 else "3"))  # f32 auto tile
    rows.append({"model": f"q4_K {N}x{K} matrix", "weights": "synthetic", "metric": "fma_peak_fraction",
                 "context": "bench matmul, T = 512, default tile, quantize dispatch included", "wgllm": on["peak_fraction"],
                 "peer": "default", "peer_value": off["peak_fraction"], "ratio_ci": None, "noise_band": None,
                 "config": "--matmul-int8", "commit": "a28bd65", "source": "speed_checks_b/matmul_int8_q4_K.json"})

# 6. Against llama.cpp CUDA (same sdist, same files, same run; A = wgllm with both int8 switches,
#    B = llama-bench through tools/peers/peer_llamacpp.sh) and the Qwen3.5-0.8B-shaped A/Bs (6c6fd19).
for m in ("lfm2-1.2b", "qwen25-1.5b"):
    j = load(f"peers_and_qwen35/vs_cuda_int8_{m}.json")
    for metric, ctx in (("decode_tok_s", "decode after 512, 128 steps"), ("ttft_ms", "TTFT, prompt 512")):
        x = j["metrics"][metric]
        r = x["ratio_b_over_a"]
        rows.append({"model": SYN[m], "weights": "synthetic", "metric": metric, "context": ctx,
                     "wgllm": statistics.median(x["a1"] + x["a2"]), "peer": "llama.cpp-cuda",
                     "peer_value": statistics.median(x["b"]), "ratio_ci": [1 / r["hi"], 1 / r["lo"]],
                     "noise_band": x["noise_band"], "config": "--matvec-int8 --matmul-int8", "commit": "6c6fd19",
                     "source": f"peers_and_qwen35/vs_cuda_int8_{m}.json"})
SYN["qwen35-0.8b"] = "Qwen3.5-0.8B-shaped"
for f, cfg in (("fuse_qk_norm_qwen35", "--fuse-qk-norm"), ("fuse_attn_gate_qwen35", "--fuse-attn-gate")):
    ab(f"peers_and_qwen35/{f}.json", SYN["qwen35-0.8b"], "decode after 512, 128 steps", cfg, "b", ["decode_tok_s"], "6c6fd19")
ab("peers_and_qwen35/int8_both_qwen35.json", SYN["qwen35-0.8b"], "decode after 512, 128 steps; TTFT 512",
   "--matvec-int8 --matmul-int8", "b", ["decode_tok_s", "ttft_ms"], "6c6fd19")

json.dump({"commit": "a28bd65", "date": "2026-12-02", "device": DEVICE, "rows": rows},
          open(os.path.join(D, "summary.json"), "w"), indent=1)
print(f"summary.json: {len(rows)} rows")
