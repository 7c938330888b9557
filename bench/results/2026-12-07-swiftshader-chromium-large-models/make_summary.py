#!/usr/bin/env python3
"""summary.json for this folder from raw/result_<model>.json (the page's result, web/bench_run.js) and
raw/native_<model>.txt (`wgllm run --print-ids`): per model the wasm heap after the streamed load against
the file's size, and the browser's greedy ids against the native CLI's."""
import glob, json, os

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = {"qwen25-1.5b": ("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M", "real"),
         "q7b-synthetic": ("Qwen2.5-7B-Instruct-shaped-Q4_K_M-synthetic", "synthetic")}


def native_ids(path):
    for line in open(path):
        if line.startswith("token_ids:"):
            return json.loads(line.split(":", 1)[1])
    return None


rows = []
for f in sorted(glob.glob(os.path.join(HERE, "raw", "result_*.json"))):
    key = os.path.basename(f)[len("result_"):-5]
    model, weights = NAMES.get(key, (key, "unknown"))
    r = json.load(open(f))
    load = r["load"]
    base = {"model": model, "weights": weights, "config": "product",
            "label": "browser (Chromium 156 headless, WebGPU on SwiftShader: a CPU-emulated GPU)",
            "ratio_ci": None, "source": os.path.relpath(f, HERE)}
    ctx = f"streamed load (download -> browser storage -> GPU), file {load['file_bytes']} bytes"
    rows.append({**base, "metric": "wasm_heap_after_load_bytes", "context": ctx, "wgllm": load["heap_bytes"]})
    rows.append({**base, "metric": "wasm_heap_to_file_fraction", "context": ctx, "wgllm": load["heap_bytes"] / load["file_bytes"]})
    rows.append({**base, "metric": "largest_read_bytes", "context": ctx, "wgllm": load["largest_read_bytes"]})
    ids = (r.get("greedy") or {}).get("token_ids")
    nat = native_ids(os.path.join(HERE, "raw", f"native_{key}.txt"))
    if ids is not None and nat:
        same = next((i for i in range(min(len(ids), len(nat))) if ids[i] != nat[i]), min(len(ids), len(nat)))
        rows.append({**base, "metric": "greedy_prefix_equal_fraction",
                     "context": f"{len(nat)} greedy tokens of the bench prompt (chat template); browser {ids}, native {nat}",
                     "wgllm": same / len(nat), "peer": "native (wgllm CLI on lavapipe)", "peer_value": 1.0})
commit = open(os.path.join(HERE, "raw", "machine.txt")).readline().strip()[:7] if os.path.exists(os.path.join(HERE, "raw", "machine.txt")) else "unknown"
json.dump({"commit": commit, "date": "2026-12-07",
           "device": "CPU-only development machine (2 cores, 24 GiB): SwiftShader in Chromium, lavapipe natively",
           "rows": rows}, open(os.path.join(HERE, "summary.json"), "w"), indent=1)
for x in rows:
    print(x["model"], x["metric"], x["wgllm"])
