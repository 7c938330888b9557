#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs (raw/).
raw/mtprofile (binary 1ea647a, product): `bench multi-turn --profile` (GPU time of each turn's prefill
forward and its attention share) and `bench attention` at a chat turn's shape (76 new tokens over 185
and 2732 cached keys). raw/flashpf (working tree before 76bf770: --attn-flash-prefetch for tiles
with separate K and V arrays only, so the head-dim-128 files have no flash-pf rows) and raw/flashpf2
(binary 16a6d92, where present): `bench attention` per kernel variant, the multi-turn A/B of the flash
kernel for chat turns, --attn-decode-late-v and the TTFT A/B of --attn-flash --attn-flash-prefetch
(bench ab's ttft_ms there is the first prompt length's, 512; the 4096 figures are in its text tables).
raw/flashprod (binary 327db7b, where present): the product with flash attention on GPUs against
--no-attn-flash (multi-turn, TTFT 512 and 4096, a decode control) and against llama.cpp CUDA.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import glob, json, os, re, statistics, sys

D = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(D, "..", "..", "..", "tools", "device"))
import summarize  # noqa: E402  (ab_rows)

rows = []
Q, S = "Qwen2.5-1.5B-shaped (its header)", "SmolLM2-135M-shaped (its header)"
MODEL = {"qwen25-1.5b": Q, "qwen25": Q, "smollm2": S}
COMMIT = {"mtprofile": "1ea647a", "flashpf": "76bf770 (pre)", "flashpf2": "16a6d92"}


def label(v):
    """A `bench attention` variant in words (kernel, split rule, switches)."""
    k = ("gqa-decode" if v.get("attn_decode_gqa") else "flash" if v.get("attn_flash") else
         "tiled" if v.get("attn_tiled") else "per-row")
    parts = [k]
    if v.get("attn_flash") and v.get("attn_flash_unroll") is False:
        parts.append("loop form")
    if v.get("attn_flash_prefetch"):
        parts.append("--attn-flash-prefetch")
    if v.get("attn_decode_late_v"):
        parts.append("--attn-decode-late-v")
    if v.get("attn_split"):
        parts.append(f"split (target {v['split_target']} workgroups)" if v.get("split_target") else
                     f"split {v['decode_split_len']} keys" if v.get("decode_split_len") else "split")
        if v.get("attn_flash") and v.get("attn_flash_split_tiles", 2) != 2:
            parts.append(f">= {v['attn_flash_split_tiles']} tiles per split")
    return ", ".join(parts)


for part in ("mtprofile", "flashpf", "flashpf2"):
    for p in sorted(glob.glob(os.path.join(D, "raw", part, "*.json"))):
        j = json.load(open(p))
        if j.get("benchmark") != "attention":
            continue
        shape = f"{j['heads']}/{j['kv_heads']} heads x {j['head_dim']}"
        for v in j["variants"]:
            rows.append({"model": f"attention op ({shape})", "weights": "synthetic", "metric": "attention_op_us",
                         "context": f"T={j['tokens']} over {j['cache']} cached keys, {label(v)}", "wgllm": v["median_us"],
                         "ratio_ci": None, "noise_band": (v["max_us"] - v["min_us"]) / v["median_us"],
                         "config": "kernel alone", "fma_peak_fraction": v["peak_fraction"], "commit": COMMIT[part],
                         "source": os.path.relpath(p, D)})

# Multi-turn profile: per turn the GPU time of the turn's prefill forward and its attention share.
p = os.path.join(D, "raw", "mtprofile", "mtprofile_smollm2.json")
if os.path.exists(p):
    t = {x["turn"]: x for x in json.load(open(p))["turns"]}
    for turn in (2, 30):
        for k in ("profile_gpu_us", "profile_attention_us"):
            rows.append({"model": S, "weights": "synthetic", "metric": k.replace("profile_", "turn_prefill_"),
                         "context": f"bench multi-turn --turns 30 --profile, turn {turn} ({t[turn]['new_tokens']} new tokens "
                                    f"over {t[turn]['prompt_tokens'] - t[turn]['new_tokens']}; timestamps per dispatch)",
                         "wgllm": t[turn][k], "ratio_ci": None, "config": "product", "commit": "1ea647a",
                         "source": "raw/mtprofile/mtprofile_smollm2.json"})

def multiturn(part, prefix, configs, commit):
    """One row per arm of interleaved `bench multi-turn --turns 30` runs (raw/PART/PREFIX_ARM_r*.json):
    session TTFT turn 30 / turn 2, its spread over the runs, the turn 2 / turn 30 / mean figures."""
    for arm, config in configs.items():
        fs = sorted(glob.glob(os.path.join(D, "raw", part, f"{prefix}_{arm}_r*.json")))
        if not fs:
            continue
        ratios, t2, t30, mean = [], [], [], []
        for f in fs:
            t = {x["turn"]: x["ttft_session_ms"] for x in json.load(open(f))["turns"]}
            ratios.append(t[30] / t[2]), t2.append(t[2]), t30.append(t[30]), mean.append(sum(t[k] for k in range(2, 31)) / 29)
        rows.append({"model": S, "weights": "synthetic", "metric": "session_ttft_turn30_over_turn2_fraction",
                     "context": f"bench multi-turn --turns 30 (64 user + 16 reply tokens a turn, 2.7k at turn 30), {len(fs)} runs",
                     "wgllm": statistics.mean(ratios), "ratio_ci": None, "noise_band": max(ratios) - min(ratios),
                     "config": config, "commit": commit, "runs": ratios, "turn2_ms": t2, "turn30_ms": t30,
                     "mean_turns_2_30_ms": mean, "source": f"raw/{part}/{prefix}_{arm}_r*.json"})


# Multi-turn A/B/C (raw/flashpf2/mtflash_*): session TTFT turn 30 / turn 2 per run.
multiturn("flashpf2", "mtflash", {"A": "product (tiled kernel for chat turns)", "B": "--attn-chunk --attn-flash-prefetch",
                                  "C": "--attn-chunk --attn-flash-prefetch --attn-flash-split-tiles 4"}, "16a6d92")


def ab(path, model, context, config, metrics, peer, commit):
    p = os.path.join(D, "raw", path + ".json")
    if not os.path.exists(p):
        return
    for r in summarize.ab_rows(p, model, context, peer, True, config):
        if r["metric"] in metrics:
            r.pop("broken_meter")
            r.update(weights="synthetic", commit=commit, source="raw/" + path + ".json")
            rows.append(r)


for m in ("qwen25-1.5b", "smollm2"):
    ab(f"flashpf2/latev_decode_{m}", MODEL[m], "decode after 512, 128 steps", "--attn-decode-late-v (B) vs product (A)",
       ["decode_tok_s"], "product", "16a6d92")
    ab(f"flashpf2/flash_ttft_{m}", MODEL[m], "TTFT 512 (cold; bench ab took the first of --prompt-lengths 512,4096: the 4096 figures are in the text tables)", "--attn-flash --attn-flash-prefetch (B) vs product (A)",
       ["ttft_ms"], "product", "16a6d92")
# raw/flashprod (binary 327db7b, the product with flash attention on GPUs): A = --no-attn-flash (the earlier
# product), B = product; and the product against llama.cpp CUDA.
PROD = "product (flash attention for T > 1) (B) vs --no-attn-flash (A, the earlier product)"
for m in ("smollm2", "qwen25-1.5b"):
    for p in (512, 4096):
        ab(f"flashprod/prod_ttft{p}_{m}", MODEL[m], f"TTFT {p} (cold)", PROD, ["ttft_ms"], "--no-attn-flash", "327db7b")
ab("flashprod/prod_decode_control_smollm2", S, "decode after 512, 128 steps (control: one-token steps never take the flash kernel)",
   PROD, ["decode_tok_s"], "--no-attn-flash", "327db7b")
for m in ("smollm2", "qwen25-1.5b"):
    p = os.path.join(D, "raw", "flashprod", f"vs_cuda_{m}.json")
    if os.path.exists(p):
        for r in summarize.ab_rows(p, MODEL[m], "decode after 512, 128 steps / TTFT 512", "llama.cpp-cuda", False, "product"):
            r.pop("broken_meter")
            r.update(weights="synthetic", commit="327db7b", source=f"raw/flashprod/vs_cuda_{m}.json")
            rows.append(r)
for m in ("smollm2", "qwen25-1.5b"):
    p = os.path.join(D, "raw", "flashprod", f"vs_cuda_p4096_{m}.json")
    if os.path.exists(p):
        for r in summarize.ab_rows(p, MODEL[m], "TTFT 4096 (cold)", "llama.cpp-cuda", False, "product"):
            r.pop("broken_meter")
            r.update(weights="synthetic", commit="327db7b", source=f"raw/flashprod/vs_cuda_p4096_{m}.json")
            rows.append(r)
multiturn("flashprod", "mtprod", {"A": "--no-attn-flash (the earlier product)", "B": "product (flash attention for T > 1)"},
          "327db7b")
gpu = open(os.path.join(D, "raw", "mtprofile", "gpu.txt")).read()
drv = re.search(r"NVIDIA H200, ([0-9.]+)", gpu).group(1)
json.dump({"commit": "1ea647a..", "date": "2026-12-03", "device": f"NVIDIA H200 (Vulkan, driver {drv})", "rows": rows},
          open(os.path.join(D, "summary.json"), "w"), indent=1)
print(f"{len(rows)} rows")
