#!/usr/bin/env python3
"""Writes summary.json (/work/shared/RESULTS.md shape) from the raw outputs of recipe.sh: greedy.json
(the harness's load result and greedy run, compared with the native ids), greedy.log (/usr/bin/time
-v), native_run.txt, file_size.txt; with the figures of ../2026-12-05-lavapipe-node-qwen35-0.8b/ (the
same recipe at b10059b, before the embedding moved onto the GPU) as the peer where a figure exists in
both. Every figure is Dawn in Node, not a browser, on lavapipe."""
import json
import pathlib
import re

here = pathlib.Path(__file__).resolve().parent
before_dir = here.parent / "2026-12-05-lavapipe-node-qwen35-0.8b"
LABEL = "Dawn in Node, not a browser"
greedy = json.load(open(here / "greedy.json"))
before = json.load(open(before_dir / "greedy.json"))
file_bytes = int((here / "file_size.txt").read_text().split()[0])
assert greedy["label"] == LABEL
L, B = greedy["load"], before["load"]
assert L["file_bytes"] == file_bytes == B["file_bytes"], (L["file_bytes"], file_bytes, B["file_bytes"])
PEER = "host-gathered embedding (b10059b, ../2026-12-05-lavapipe-node-qwen35-0.8b)"


def peak_rss_bytes(path):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", path.read_text())
    return int(m.group(1)) * 1024 if m else None


model = f"Qwen3.5-0.8B shapes (hybrid: Gated DeltaNet + attention, vocabulary {L['vocab_size']}), synthetic weights"
ctx = f"{LABEL}; streamed load, no kernel warm-up, context {L['context_length']}"
rows = [
    {"metric": "model_file_bytes", "wgllm": file_bytes, "context": LABEL},
    {"metric": "wasm_heap_bytes", "wgllm": L["heap_bytes"], "peer": PEER, "peer_value": B["heap_bytes"],
     "context": ctx + "; the wasm heap after loading (before: the embedding's stored bytes were kept there)"},
    {"metric": "largest_read_bytes", "wgllm": L["largest_read_bytes"], "peer": PEER, "peer_value": B["largest_read_bytes"],
     "context": ctx + "; the largest single read from the file"},
    {"metric": "streamed_bytes", "wgllm": L["streamed_bytes"], "peer": PEER, "peer_value": B["streamed_bytes"],
     "context": ctx + "; bytes read from the file during the load (before: the tied table read twice)"},
    {"metric": "gpu_weights_bytes", "wgllm": L["weights_bytes"], "peer": PEER, "peer_value": B["weights_bytes"],
     "context": ctx + "; GPU weight buffers (the tied table once, in row blocks shared by embedding and head)"},
    {"metric": "decode_pipeline_on_fraction", "wgllm": float(bool(L["decode_pipeline"])), "peer": PEER,
     "peer_value": float(bool(B["decode_pipeline"])),
     "context": ctx + "; whether pipelined greedy decoding is available (1) on this model in the browser build"},
    {"metric": "node_peak_rss_bytes", "wgllm": peak_rss_bytes(here / "greedy.log"), "peer": PEER,
     "peer_value": peak_rss_bytes(before_dir / "greedy.log"),
     "context": ctx + "; /usr/bin/time -v, load + greedy (different numbers of greedy tokens)"},
]
g = greedy["greedy"]
ids, nat = g["token_ids"], g.get("native_token_ids")
ctx_g = (f"{LABEL}; chat prompt of {g['usage']['prompt_tokens']} tokens, {len(ids)} greedy tokens, no kernel warm-up "
         "(the first forward compiles the kernels); 2-core machine: not a speed comparison")
same = sum(a == b for a, b in zip(ids, nat)) / max(len(nat), 1)
rows.append({"metric": "greedy_ids_equal_native_fraction", "wgllm": same, "peer": "native", "peer_value": 1.0,
             "context": ctx_g + f"; wasm {ids} vs native {nat}"})
for r in rows:
    r.update(model=model, weights="synthetic", config="product (--warmup 0)")
    r.setdefault("ratio_ci", None)
    r.setdefault("noise_band", None)
dev = L["adapter"]["description"] + " (lavapipe, Vulkan via Dawn in Node, not a browser; 2-core 24 GiB machine)"
json.dump({"commit": (here / "commit.txt").read_text().strip(), "date": "2026-12-05", "device": dev, "label": LABEL,
           "rows": rows}, open(here / "summary.json", "w"), indent=1)
print(f"{len(rows)} rows")
