#!/usr/bin/env python3
"""Writes summary.json (/work/shared/RESULTS.md shape) from the raw outputs of recipe.sh:
load_only.json / load_only.log (the harness's load result, /usr/bin/time -v), greedy.json (the
greedy run, its file_reads and the native comparison), native_run.txt / native_run.log (the native
CLI's ids and time), file_size.txt. Every figure is Dawn in Node, not a browser, on lavapipe."""
import json
import pathlib
import re

here = pathlib.Path(__file__).resolve().parent
LABEL = "Dawn in Node, not a browser"
load = json.load(open(here / "load_only.json"))
greedy = json.load(open(here / "greedy.json"))
file_bytes = int((here / "file_size.txt").read_text().split()[0])
assert load["label"] == LABEL and greedy["label"] == LABEL


def peak_rss_bytes(log):
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", (here / log).read_text())
    return int(m.group(1)) * 1024 if m else None


model = "Qwen2.5-7B-Instruct shapes, Q4_K_M (synthetic weights)"
ctx_load = f"{LABEL}; streamed load, no kernel warm-up, context {load['load']['context_length']}"
L = load["load"]
assert L["file_bytes"] == file_bytes, (L["file_bytes"], file_bytes)
rows = [
    {"metric": "model_file_bytes", "wgllm": file_bytes, "context": f"{LABEL}; > 4 GiB = 4294967296 bytes"},
    {"metric": "load_ms", "wgllm": round(L["load_ms"], 1), "context": ctx_load + " (wgllm_load_stream)"},
    {"metric": "page_load_ms", "wgllm": round(L["page_load_ms"], 1), "context": ctx_load + " (CreateEngine, page side)"},
    {"metric": "wasm_heap_bytes", "wgllm": L["heap_bytes"], "context": ctx_load + "; the wasm heap after loading (file_bytes beside it)"},
    {"metric": "streamed_bytes", "wgllm": L["streamed_bytes"], "context": ctx_load + "; bytes read through the heap in windows"},
    {"metric": "largest_read_bytes", "wgllm": L["largest_read_bytes"], "context": ctx_load + "; the largest single read (the embedding, kept on the host)"},
    {"metric": "gpu_weights_bytes", "wgllm": L["weights_bytes"], "context": ctx_load + "; GPU weight buffers (packed)"},
    {"metric": "gpu_scratch_bytes", "wgllm": L["scratch_bytes"], "context": ctx_load + "; GPU scratch and KV buffers"},
    {"metric": "node_peak_rss_bytes", "wgllm": peak_rss_bytes("load_only.log"), "context": ctx_load + "; /usr/bin/time -v (lavapipe's 'GPU' buffers are host memory)"},
]
fr = load.get("file_reads")
if fr:
    rows.append({"metric": "bytes_read_past_4gib_bytes", "wgllm": fr["bytes_past_4gib"],
                 "context": ctx_load + f"; the FileReaderSync shim's bytes read at file offsets >= 2^32 ({fr['reads_past_4gib']} of {fr['reads']} reads end past 2^32; highest byte read {fr['max_end']})"})
if (here / "load_only_r0.json").exists():  # the first load-only run (harness before file_reads)
    r0 = json.load(open(here / "load_only_r0.json"))["load"]
    rows.append({"metric": "load_ms", "wgllm": round(r0["load_ms"], 1), "context": ctx_load + " (wgllm_load_stream), first load-only run (load_only_r0.json)"})
if greedy.get("load"):
    rows.append({"metric": "load_ms", "wgllm": round(greedy["load"]["load_ms"], 1),
                 "context": f"{LABEL}; streamed load before the greedy run, context {greedy['load']['context_length']} (greedy.json)"})
g = greedy.get("greedy")
if g:
    ids, nat = g["token_ids"], g.get("native_token_ids")
    ctx_g = (f"{LABEL}; chat prompt of {g['usage']['prompt_tokens']} tokens, {len(ids)} greedy tokens, no kernel warm-up "
             "(the first forward compiles the kernels); 2-core machine shared with another engineer's C++ build: not a speed comparison")
    if nat is not None:
        same = sum(a == b for a, b in zip(ids, nat)) / max(len(nat), 1)
        rows.append({"metric": "greedy_ids_equal_native_fraction", "wgllm": same, "peer": "native", "peer_value": 1.0,
                     "context": ctx_g + f"; wasm {ids} vs native {nat}"})
    ex = g["usage"].get("extra", {})
    if "ttft_ms" in ex:
        nat_txt = (here / "native_run.log").read_text()
        m = re.search(r"TTFT ([0-9.]+) ms", nat_txt)
        row = {"metric": "ttft_ms", "wgllm": round(ex["ttft_ms"], 1), "context": ctx_g}
        if m:
            row.update(peer="native", peer_value=float(m.group(1)))
        rows.append(row)
    if "decode_tokens_per_s" in ex:
        m = re.search(r"decode ([0-9.]+) tok/s", (here / "native_run.log").read_text())
        row = {"metric": "decode_tok_s", "wgllm": round(ex["decode_tokens_per_s"], 4), "context": ctx_g + "; one decode step"}
        if m:
            row.update(peer="native", peer_value=float(m.group(1)))
        rows.append(row)
for r in rows:
    r.update(model=model, weights="synthetic", config="product (--warmup 0)")
    r.setdefault("ratio_ci", None)
    r.setdefault("noise_band", None)
commit = (here / "commit.txt").read_text().strip()
dev = L["adapter"]["description"] + " (lavapipe, Vulkan via Dawn in Node, not a browser; 2-core 24 GiB machine)"
json.dump({"commit": commit, "date": "2026-12-04", "device": dev, "label": LABEL, "rows": rows},
          open(here / "summary.json", "w"), indent=1)
print(f"{len(rows)} rows")
