#!/usr/bin/env python3
"""summary.json (../shared/RESULTS.md) for a tools/device/recipes/real_models.sh results folder.

Rows per model: the slice perplexity (Moby-Dick bytes 20000..32000, n_ctx 512, 2 chunks) against
llama-perplexity's value on the same file and slice, read from a log given with --peer MODEL=LOG (a
llama-perplexity output, "Final estimate: PPL = X +/- Y", or an agreement-test log line
"llama-perplexity X +/- Y"); the whole-text perplexity and its scoring speed (no peer).
Usage: real_models_summary.py DIR --commit C [--peer qwen25-1.5b=LOG ...] (DIR holds the recipe's files)
"""
import argparse, datetime, glob, json, os, re

NAMES = {"qwen25-1.5b": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", "gemma3-270m": "gemma-3-270m-Q4_K_M"}


def peer_ppl(path):
    text = open(path, errors="replace").read()
    m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", text) or \
        re.search(r"llama-perplexity ([0-9.]+) \+/- ([0-9.]+)", text)
    if not m:
        raise SystemExit(f"no llama-perplexity estimate in {path}")
    return float(m.group(1)), float(m.group(2))


def device(d):
    try:
        line = open(os.path.join(d, "gpu.txt")).read().splitlines()[1]
        name, driver = [x.strip() for x in line.split(",")[:2]]
        return f"{name} (Vulkan, driver {driver})"
    except (OSError, IndexError, ValueError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--peer", action="append", default=[], help="MODEL=LOG")
    ap.add_argument("--device", help="the machine (default: the GPU in DIR/gpu.txt)")
    a = ap.parse_args()
    peers = {k: peer_ppl(v) for k, v in (p.split("=", 1) for p in a.peer)}
    rows = []
    for f in sorted(glob.glob(os.path.join(a.dir, "ppl_slice_*.json"))):
        m = os.path.basename(f)[len("ppl_slice_"):-5]
        j = json.load(open(f))
        base = {"model": NAMES.get(m, m), "weights": "real", "config": "product"}
        row = {**base, "metric": "perplexity_ppl",
               "context": f"Moby-Dick bytes 20000..32000, n_ctx {j['n_ctx']}, {j['chunks']} chunks "
                          f"({j['tokens_scored']} tokens scored), llama-perplexity's method",
               "wgllm": j["ppl"], "wgllm_stderr": j["stderr"], "backend": j["backend"], "ratio_ci": None,
               "source": os.path.basename(f)}
        if m in peers:
            row.update(peer="llama.cpp-cpu (llama-perplexity)", peer_value=peers[m][0], peer_stderr=peers[m][1],
                       relative_difference=(j["ppl"] - peers[m][0]) / peers[m][0], bound=0.005)
        rows.append(row)
        g = os.path.join(a.dir, f"ppl_all_{m}.json")
        if os.path.exists(g):
            k = json.load(open(g))
            ctx = f"the whole of Moby-Dick, n_ctx {k['n_ctx']}, {k['chunks']} chunks ({k['tokens_scored']} tokens scored of {k['tokens']})"
            rows.append({**base, "metric": "perplexity_ppl", "context": ctx, "wgllm": k["ppl"],
                         "wgllm_stderr": k["stderr"], "ratio_ci": None, "source": os.path.basename(g)})
            rows.append({**base, "metric": "perplexity_scoring_tok_s", "context": ctx + f", {k['seconds']:.1f} s",
                         "wgllm": k["tokens_per_second"], "ratio_ci": None, "source": os.path.basename(g)})
    out = {"commit": a.commit, "date": a.date, "device": a.device or device(a.dir), "rows": rows}
    json.dump(out, open(os.path.join(a.dir, "..", "summary.json") if os.path.basename(a.dir.rstrip("/")) == "raw"
                        else os.path.join(a.dir, "summary.json"), "w"), indent=1)
    for r in rows:
        print(r["model"], r["metric"], r["context"], round(r["wgllm"], 4), r.get("peer_value"), r.get("relative_difference"))


if __name__ == "__main__":
    main()
