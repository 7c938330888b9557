#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs (raw/).
Rows: the switch A/Bs of `wgllm bench ab` (wgllm = the arm with the candidate setting, peer "default"
or the named setting = the other arm, ratio_ci = candidate / other), the null control, wgllm against
llama.cpp CUDA (ratio_ci = wgllm / llama.cpp), the decode dispatch count of `bench --traffic` and the
marginal cost of each kernel (`bench --repeat-kernel`, raw/second/marginal/).
raw/first_form: the first form of --fuse-attn-combine (merge per int8 block, one thread each; commit
534f4cf); raw/second: the form that landed (all threads merge into workgroup memory) and the split
lengths; raw/kbatch: --attn-decode-k-batch and the product against llama.cpp after both changes.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import collections, json, os, re, statistics, sys

D = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(D, "..", "..", "..", "tools", "device"))
import summarize  # noqa: E402  (ab_rows)

rows = []
Q, L, S = "Qwen2.5-1.5B-shaped (its header)", "LFM2-1.2B-shaped (its config)", "SmolLM2-135M-shaped (its header)"
MODEL = {"qwen25-1.5b": Q, "qwen25": Q, "lfm2-1.2b": L, "smollm2": S}


def ab(path, model, context, config, on_arm, metrics, peer, commit):
    """The rows of one `bench ab` result (tools/device/summarize.py ab_rows: medians of the arms,
    the interval inverted when the candidate is arm A), for `metrics` only, labelled for this folder."""
    p = os.path.join(D, "raw", path + ".json")
    if not os.path.exists(p):
        return
    for r in summarize.ab_rows(p, model, context, peer, on_arm == "b", config):
        if r["metric"] in metrics:
            r.pop("broken_meter")
            r.update(weights="synthetic", commit=commit, source="raw/" + path + ".json")
            rows.append(r)


C1, C2, C3 = "534f4cf", "573150f", "6b889ff"
P512 = "decode after 512, 128 steps"
for m in ("smollm2", "qwen25-1.5b", "lfm2-1.2b"):
    ab(f"first_form/fuse_attn_combine_{m}", MODEL[m], P512, "--fuse-attn-combine first form (B) vs --no-fuse-attn-combine (A), split 64",
       "b", ["decode_tok_s", "ttft_ms"], "--no-fuse-attn-combine", C1)
    ab(f"second/fuse_attn_combine_{m}", MODEL[m], P512, "--fuse-attn-combine (B) vs --no-fuse-attn-combine (A), split 64",
       "b", ["decode_tok_s", "ttft_ms"], "--no-fuse-attn-combine", C2)
ab("second/fuse_attn_combine_split128_qwen25", Q, P512, "--fuse-attn-combine (B) vs off (A), both --attn-decode-split-len 128",
   "b", ["decode_tok_s"], "--no-fuse-attn-combine", C2)
ab("second/null_qwen25", Q, P512, "null control: A and B both the product configuration", "b", ["decode_tok_s", "ttft_ms"],
   "same configuration", C2)
for n in (32, 128, 256):
    ab(f"second/split_len_{n}_qwen25", Q, P512, f"--attn-decode-split-len {n} (B) vs 64 (A)", "b", ["decode_tok_s"],
       "--attn-decode-split-len 64", C2)
for m in ("smollm2", "lfm2-1.2b"):
    ab(f"second/split_len_128_{m}", MODEL[m], P512, "--attn-decode-split-len 128 (B) vs 64 (A)", "b", ["decode_tok_s"],
       "--attn-decode-split-len 64", C2)
ab("second/split_len_128_qwen25_p2048", Q, "decode after 2048, 128 steps", "--attn-decode-split-len 128 (B) vs 64 (A)", "b",
   ["decode_tok_s"], "--attn-decode-split-len 64", C2)
for m in ("smollm2", "qwen25-1.5b"):
    ab(f"second/vs_cuda_{m}", MODEL[m], P512 + " / TTFT 512",
       "product at 573150f with --attn-decode-split-len 128 (the GPU default from the next commit)", "a",
       ["decode_tok_s", "ttft_ms"], "llama.cpp-cuda", C2)
    ab(f"kbatch/k_batch_{m}", MODEL[m], P512, "--attn-decode-k-batch 8 (B, the GPU default from the next commit) vs 1 (A)", "b", ["decode_tok_s"],
       "--attn-decode-k-batch 1", C3)
    ab(f"kbatch/vs_cuda_{m}", MODEL[m], P512 + " / TTFT 512", "product", "a", ["decode_tok_s", "ttft_ms"], "llama.cpp-cuda", C3)
ab("kbatch/k_batch_lfm2-1.2b", L, P512, "--attn-decode-k-batch 8 (B, the GPU default from the next commit) vs 1 (A)", "b", ["decode_tok_s"],
   "--attn-decode-k-batch 1", C3)
ab("kbatch/no_fuse_norm_qwen25", Q, P512, "--no-fuse-norm (B) vs product (A)", "b", ["decode_tok_s"], "product", C3)
for form, commit in (("first_form", C1), ("second", C2)):
    t = open(os.path.join(D, "raw", form, "traffic_qwen25.md")).read()
    n = int(re.search(r"dispatches per decode step: (\d+)", t).group(1))
    rows.append({"model": Q, "weights": "synthetic", "metric": "decode_dispatches_per_step", "context": "decode after 512",
                 "wgllm": n, "peer": "2f462d5", "peer_value": 185, "ratio_ci": None, "noise_band": None,
                 "config": "product (peer_value: ../2026-12-02-h200-int8-default/raw/traffic_qwen25-1.5b.md)",
                 "commit": commit, "source": f"raw/{form}/traffic_qwen25.md"})
# Marginal cost per kernel label: step time (1e6 / decode tok/s) with its dispatches recorded twice
# minus the plain runs' median, median of 2 rounds (bench's one-line result of each run).
runs = collections.defaultdict(list)
MD = os.path.join(D, "raw", "second", "marginal")
for f in sorted(os.listdir(MD)):
    m, k = re.match(r"marginal_(qwen25-1\.5b|smollm2)_(.+)_r\d\.txt", f).groups()
    r = [json.loads(l) for l in open(os.path.join(MD, f)) if l.startswith('{"configuration"')][-1]
    runs[(m, k)].append(1e6 / r["decode_tok_s"])
for (m, k), v in sorted(runs.items()):
    # SmolLM2's step varies by +-100 us between runs on this machine (labels it does not have, such as
    # attn_v, "cost" 1-41 us): its rows are left out; the Qwen2.5 rounds agree within 4 us.
    if k == "none" or m == "smollm2":
        continue
    base = statistics.median(runs[(m, "none")])
    rows.append({"model": MODEL[m], "weights": "synthetic", "metric": f"decode_marginal_us_per_step:{k}",
                 "context": "decode after 512 (its dispatches recorded twice; weights then partly in L2: a lower bound)",
                 "wgllm": statistics.median(v) - base, "peer": None, "peer_value": None, "ratio_ci": None,
                 "noise_band": None, "config": "product at 573150f + --repeat-kernel " + k, "commit": C2,
                 "source": "raw/second/marginal/"})
out = {"commit": C3, "date": "2026-12-03", "device": "NVIDIA H200 (Vulkan, driver 580.159.04)", "rows": rows}
json.dump(out, open(os.path.join(D, "summary.json"), "w"), indent=1)
for r in rows:
    pv = "" if r["peer_value"] is None else f"vs {r['peer']} {r['peer_value']:9.2f}"
    print(f"{r['model'][:22]:22} {r['metric'][:40]:40} {r['wgllm']:9.2f} {pv}")
