#!/usr/bin/env python3
"""Writes summary.json for this folder from raw/ (the device call's files, unchanged):
  raw/um_<switch>_<model>.json   `wgllm bench ab`: A = the product configuration, B = the switch's other
                                 setting (cmd_b - cmd_a names it); one row per metric, wgllm = B's median,
                                 peer "default" = A's median (A1 and A2 together), ratio_ci = B/A's interval
  raw/um_mt_<arm>_r<k>.json      `wgllm bench multi-turn --session-only`: session TTFT at turn 30 and the
                                 turn-30 / turn-2 ratio per round, --no-attn-prefill-split vs default
  raw/um_long_*.json             `wgllm bench long-context`: prefill time of 8192 tokens with --no-sparse-tiled, top-k 16 / 32
                                 and dense, against --sparse-attn with the defaults (call 29)
Usage: python3 make_summary.py   (in this folder)"""
import glob, json, os, statistics

HERE = os.path.dirname(os.path.abspath(__file__))
RAW = os.path.join(HERE, "raw")
MODELS = {"smollm2": "SmolLM2-135M-Instruct-Q4_1-shaped", "qwen25": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M-shaped",
          "qwen35": "Qwen3.5-0.8B-shaped (tools/synth/configs/qwen3.5-0.8b.json)",
          "lfm2": "LFM2-1.2B-shaped (tools/synth/configs/lfm2-1.2b.json)"}
rows = []


def model_of(name):
    return MODELS[name.rsplit("_", 1)[1]]


def setting(cmd_a, cmd_b):
    extra = cmd_b[len(cmd_a):].strip() if cmd_b.startswith(cmd_a) else cmd_b
    return extra or "null control (B = A)"


def prompt_of(cmd):
    return cmd.split("--prompt-lengths ")[1].split()[0]


for f in sorted(glob.glob(os.path.join(RAW, "um_*.json"))) + [os.path.join(RAW, "gdn16_vs_32_p512.json")]:
    name = os.path.basename(f)[:-5]
    if name == "gdn16_vs_32_p512":
        name = "gdn16_vs_32_p512_qwen35"  # call 30's A/B, named before the um_ prefix
    if name.startswith(("um_mt_", "um_long_")):
        continue
    d = json.load(open(f))
    cfg = setting(d["cmd_a"], d["cmd_b"])
    peer = "default"
    if not d["cmd_b"].startswith(d["cmd_a"]):  # A is not the product configuration (e.g. --gdn-chunk 32 vs 16)
        a_opt = d["cmd_a"].split("--reps ")[1].split(None, 1)
        b_opt = d["cmd_b"].split("--reps ")[1].split(None, 1)
        peer, cfg = a_opt[1] if len(a_opt) > 1 else "default", b_opt[1] if len(b_opt) > 1 else "default"
    for metric, m in d["metrics"].items():
        a = m["a1"] + m["a2"]
        r = m["ratio_b_over_a"]
        ctx = (f"decode after a {prompt_of(d['cmd_a'])}-token prompt" if metric == "decode_tok_s"
               else f"TTFT, {prompt_of(d['cmd_a'])}-token prompt") + f", bench ab {d['rounds']} rounds"
        rows.append({"model": model_of(name), "weights": "synthetic", "metric": metric, "context": ctx,
                     "wgllm": statistics.median(m["b"]), "peer": peer, "peer_value": statistics.median(a),
                     "ratio_ci": [r["lo"], r["hi"]], "noise_band": m["noise_band"], "config": cfg,
                     "verdict": m["verdict"], "source": f"raw/{os.path.basename(f)}"})


def turns(path):
    t = {x["turn"]: x["ttft_session_ms"] for x in json.load(open(path))["turns"]}
    return t[30], t[30] / t[2]


for r in (1, 2):
    d30, dratio = turns(os.path.join(RAW, f"um_mt_default_r{r}.json"))
    n30, nratio = turns(os.path.join(RAW, f"um_mt_no_attn_prefill_split_r{r}.json"))
    base = {"model": MODELS["smollm2"], "weights": "synthetic", "peer": "default", "ratio_ci": None,
            "noise_band": None, "config": "--no-attn-prefill-split", "source": f"raw/um_mt_*_r{r}.json"}
    rows.append(dict(base, metric="session_ttft_turn30_ms", context=f"bench multi-turn --turns 30, round {r}",
                     wgllm=n30, peer_value=d30))
    rows.append(dict(base, metric="session_ttft_turn30_over_turn2_ratio", context=f"bench multi-turn --turns 30, round {r}",
                     wgllm=nratio, peer_value=dratio))

ms = lambda name: sum(c["ms"] for c in json.load(open(os.path.join(RAW, name)))["runs"][0]["chunks"])
LC = "bench long-context --contexts 8192 --sparse-threshold 2048 (one run each)"
tiled = ms("um_long_sparse.json")  # call 29, the product configuration with --sparse-attn
for name, cfg in [("um_long_sparse__no_sparse_tiled.json", "--sparse-attn --no-sparse-tiled"),
                  ("um_long_sparse_topk16.json", "--sparse-attn --sparse-top-k 16 (the default; call 31)"),
                  ("um_long_sparse_topk32.json", "--sparse-attn --sparse-top-k 32 (call 31)"),
                  ("um_long_dense.json", "dense (no --sparse-attn; call 31)")]:
    rows.append({"model": MODELS["smollm2"], "weights": "synthetic", "metric": "prefill_ms", "context": LC,
                 "wgllm": ms(name), "peer": "--sparse-attn (call 29)", "peer_value": tiled, "ratio_ci": None,
                 "noise_band": None, "config": cfg, "source": f"raw/{name}, raw/um_long_sparse.json"})
gpu = open(os.path.join(RAW, "gpu.txt")).read().splitlines()[1].split(", ")
out = {"commit": "3b9b52f", "date": "2026-12-04", "device": f"NVIDIA H200 (Vulkan, driver {gpu[1]})", "rows": rows}
json.dump(out, open(os.path.join(HERE, "summary.json"), "w"), indent=1)
print(f"summary.json: {len(rows)} rows")
