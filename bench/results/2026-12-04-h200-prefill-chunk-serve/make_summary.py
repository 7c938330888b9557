#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs.

Synthetic-weight files of the SmolLM2-135M and Qwen2.5-1.5B shapes (tools/synth/write_gguf.py from
the real files' headers; the text is noise, the speed is real), H200, four calls (README.md):
  raw/chunk   (call 1, binary 473273e, default --prefill-chunk 512): `bench ab` TTFT at 4096 tokens,
              --prefill-chunk 512 (A) vs 2048 / 4096 (B), and at 512 (control); `run --profile` of a
              3500-token prompt per chunk; `wgllm bench serve` with --prefill-chunk 512 / 2048 (2 rounds).
  raw/peers   (call 3, binary = the tree between 473273e and 54634f9: --prefill-chunk auto = 2048 on
              hardware adapters, without the tile-class warm-up): wgllm product vs llama-server (CUDA,
              llama-cpp-python 0.3.36 sdist), 2 rounds, engines alternating, round 1 the first
              wgllm serve run on that machine (after call 2's tests of tiny models there).
  raw/warmup  (call 4, binary 54634f9: + the warm-up compiles every tiled-matmul tile class, a fresh
              machine): wgllm product, 2 rounds; `bench ab` TTFT at 4096 on the SmolLM2 shape,
              --prefill-chunk 512 (A) vs the auto default (B).
  raw/peers_final (call 6, binary 54634f9, after call 5 built llama-server on a fresh machine): wgllm
              product vs llama-server, 2 rounds, engines alternating (round 1 the first wgllm run on
              that machine).
Rows: bench ab ratios (ratio_ci from the A/B, noise band from its control arms); bench serve levels
(mean over rounds, `rounds` lists each, noise band = the larger relative spread between rounds of the
two arms); the profile's per-kernel GPU time (one run each).
Usage: python3 make_summary.py   (writes summary.json beside itself)"""
import glob, json, os, re, statistics

D = os.path.dirname(os.path.abspath(__file__))
MODEL = {"qwen25-1.5b": "Qwen2.5-1.5B-shaped, synthetic (its header)",
         "smollm2": "SmolLM2-135M-shaped, synthetic (its header)"}
METRICS = {"tokens_per_s": "aggregate_decode_tok_s", "ttft_ms_p50": "ttft_p50_ms", "ttft_ms_p99": "ttft_p99_ms",
           "itl_ms_p50": "itl_p50_ms", "itl_ms_p99": "itl_p99_ms"}
C1, C3, C4 = "473273e", "473273e+auto (tree before 54634f9)", "54634f9"
rows = []


def spread(xs):
    return (max(xs) - min(xs)) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) else None


def ab_rows(path, model, context, config, peer, commit):
    d = json.load(open(path))
    m = d["metrics"]["ttft_ms"]
    rows.append({"model": MODEL[model], "weights": "synthetic", "metric": "ttft_ms", "context": context,
                 "wgllm": statistics.mean(m["b"]), "peer": peer, "peer_value": statistics.mean(m["a1"] + m["a2"]),
                 "ratio_ci": [m["ratio_b_over_a"]["lo"], m["ratio_b_over_a"]["hi"]], "noise_band": m["noise_band"],
                 "config": config, "verdict": m["verdict"], "commit": commit,
                 "source": os.path.relpath(path, D)})


def serve_runs(call, arm):
    """{model: [levels of round 1, round 2, ...]} of one engine/arm ("llama" for llama-server)."""
    out = {}
    for p in sorted(glob.glob(os.path.join(D, "raw", call, "serve_*_r*.json"))):
        m = re.match(r"serve_(wgllm|llama)(?:-([a-z0-9]+))?_(.+)_r(\d+)\.json", os.path.basename(p))
        a = "llama" if m.group(1) == "llama" else (m.group(2) or "product")
        if a == arm:
            out.setdefault(m.group(3), []).append(json.load(open(p)))
    return out


def compare(w_runs, p_runs, peer, config, commit, source, note):
    for model in sorted(set(w_runs) & set(p_runs)):
        w_rounds, p_rounds = w_runs[model], p_runs[model]
        for i, lvl in enumerate(w_rounds[0]):
            for key, metric in METRICS.items():
                w = [r[i][key] for r in w_rounds]
                p = [r[i][key] for r in p_rounds]
                bands = [b for b in (spread(w), spread(p)) if b is not None]
                rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                             "context": f"{lvl['concurrency']} concurrent streaming clients, {lvl['requests']} requests of "
                                        f"{lvl['max_tokens']} tokens; 64 slots x 1024 tokens; " + note,
                             "wgllm": statistics.mean(w), "peer": peer, "peer_value": statistics.mean(p), "ratio_ci": None,
                             "noise_band": max(bands) if bands else None, "config": config, "rounds": {"wgllm": w, "peer": p},
                             "errors": sum(r[i]["errors"] for r in w_rounds + p_rounds), "commit": commit,
                             "source": source.format(model=model)})


# 1. --prefill-chunk: TTFT A/Bs and the serve arms (call 1), the SmolLM2 TTFT A/B (call 4).
q = "qwen25-1.5b"
ab_rows(os.path.join(D, "raw/chunk/pchunk2048_ttft4096_qwen25-1.5b.json"), q, "TTFT, prompt 4096 tokens", "--prefill-chunk 2048",
        "--prefill-chunk 512 (the default of that binary)", C1)
ab_rows(os.path.join(D, "raw/chunk/pchunk4096_ttft4096_qwen25-1.5b.json"), q, "TTFT, prompt 4096 tokens", "--prefill-chunk 4096",
        "--prefill-chunk 512 (the default of that binary)", C1)
ab_rows(os.path.join(D, "raw/chunk/pchunk2048_ttft512_qwen25-1.5b.json"), q,
        "TTFT, prompt 512 tokens (control: one chunk either way)", "--prefill-chunk 2048",
        "--prefill-chunk 512 (the default of that binary)", C1)
ab_rows(os.path.join(D, "raw/warmup/pchunk_ttft4096_smollm2.json"), "smollm2", "TTFT, prompt 4096 tokens",
        "product (--prefill-chunk auto: 2048 on the H200)", "--prefill-chunk 512", C4)
compare(serve_runs("chunk", "c2048"), serve_runs("chunk", "c512"), "--prefill-chunk 512 (the default of that binary)",
        "--prefill-chunk 2048", C1, "raw/chunk/serve_wgllm-{{c2048,c512}}_{model}_r*.json",
        "arms in reverse order in round 2")
# 2. The product against llama-server in one run (call 3), and the warm-up change (call 4).
compare(serve_runs("peers", "product"), serve_runs("peers", "llama"), "llama-server", "product", C3,
        "raw/peers/serve_{{wgllm,llama}}_{model}_r*.json",
        "same run, engines alternating; round 1 the first run of each engine and model on the machine")
compare(serve_runs("warmup", "product"), serve_runs("peers", "llama"), "llama-server", "product", C4,
        "raw/warmup/serve_wgllm_{model}_r*.json; raw/peers/serve_llama_{model}_r*.json",
        "wgllm from call 4 (a fresh machine), llama-server from call 3: two machine draws")
compare(serve_runs("warmup", "product"), serve_runs("peers", "product"), "product without the tile-class warm-up (call 3)",
        "product", C4, "raw/warmup/serve_wgllm_{model}_r*.json; raw/peers/serve_wgllm_{model}_r*.json",
        "two machine draws; round 1 of each the first wgllm serve run on its machine")
compare(serve_runs("peers_final", "product"), serve_runs("peers_final", "llama"), "llama-server", "product", C4,
        "raw/peers_final/serve_{{wgllm,llama}}_{model}_r*.json",
        "same run, engines alternating; round 1 the first run of each engine and model on the machine")
# 3. Where a long prefill forward's GPU time goes (call 1; `run --profile`, timestamps per dispatch).
for p in sorted(glob.glob(os.path.join(D, "raw/chunk/pchunk_profile_qwen_c*.txt"))):
    c = re.search(r"_c(\d+)\.txt", p).group(1)
    text = open(p).read()
    total = float(re.search(r"([\d.]+) us GPU time", text).group(1))
    for k in ("attention_flash", "ffn_gate_up", "ffn_down", "attn_output", "quantize_q8"):
        m = re.search(rf"^\s+{k}\s+x\d+\s+([\d.]+) us", text, re.M)
        if m:
            rows.append({"model": MODEL[q], "weights": "synthetic", "metric": f"{k}_gpu_ms",
                         "context": f"the last forward of a 3500-token raw prompt with --prefill-chunk {c} "
                                    f"({3500 - (3499 // int(c)) * int(c)} rows over {(3499 // int(c)) * int(c)} cached; forward total {total / 1e3:.1f} ms "
                                    "GPU time, timestamps around every dispatch)",
                         "wgllm": float(m.group(1)) / 1e3, "ratio_ci": None, "config": f"--prefill-chunk {c} --profile",
                         "commit": C1, "source": os.path.relpath(p, D)})

gpu = open(os.path.join(D, "raw/peers/gpu.txt")).read().splitlines()[1].split(", ")
out = {"commit": C4, "date": "2026-12-04", "device": f"{gpu[0]} (Vulkan, driver {gpu[1]})", "rows": rows}
with open(os.path.join(D, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
print(f"summary.json: {len(rows)} rows")
