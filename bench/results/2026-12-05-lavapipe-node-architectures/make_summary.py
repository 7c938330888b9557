#!/usr/bin/env python3
"""Writes summary.json (/work/shared/RESULTS.md shape) from the raw outputs of recipe.sh: per
architecture greedy_<arch>.json (the harness's load result and greedy run, compared with the
native ids in native_<arch>.txt) and greedy_<arch>.log (/usr/bin/time -v). Every figure is Dawn in
Node, not a browser, on lavapipe."""
import json
import pathlib
import re

here = pathlib.Path(__file__).resolve().parent
LABEL = "Dawn in Node, not a browser"
WEIGHTS = {"llama": "real", "qwen2": "real", "gemma3": "real", "lfm2": "real (trained fixture)",
           "qwen35": "real (trained fixture)"}


def native_ids(path):
    m = re.search(r"token_ids: \[([0-9, ]*)\]", path.read_text())
    return [int(x) for x in m.group(1).split(",") if x.strip()] if m else None


rows, dev = [], None
for f in sorted(here.glob("greedy_*.json")):
    arch = f.stem[len("greedy_"):]
    g = json.load(open(f))
    assert g["label"] == LABEL
    L, G = g["load"], g["greedy"]
    assert L["arch"] == arch, (L["arch"], arch)
    dev = dev or L["adapter"]["description"]
    ids, nat = G["token_ids"], native_ids(here / f"native_{arch}.txt")
    assert nat == G.get("native_token_ids"), (arch, nat, G.get("native_token_ids"))
    same = sum(a == b for a, b in zip(ids, nat)) / max(len(nat), 1)
    model = f"{pathlib.Path(g['model']).name} ({arch}, vocabulary {L['vocab_size']})"
    ctx = (f"{LABEL}; chat prompt of {G['usage']['prompt_tokens']} tokens, {len(ids)} greedy tokens, context "
           f"{L['context_length']}, no kernel warm-up; decode_pipeline {str(L['decode_pipeline']).lower()}; "
           f"wasm {ids} vs native {nat}")
    common = {"model": model, "weights": WEIGHTS.get(arch, "real"), "config": "product (--warmup 0)",
              "ratio_ci": None, "noise_band": None}
    rows.append({**common, "metric": "greedy_ids_equal_native_fraction", "wgllm": same, "peer": "native",
                 "peer_value": 1.0, "context": ctx})
    rows.append({**common, "metric": "wasm_heap_bytes", "wgllm": L["heap_bytes"],
                 "context": f"{LABEL}; the wasm heap after loading a {L['file_bytes']}-byte file "
                            f"(largest single read {L['largest_read_bytes']} bytes)"})
json.dump({"commit": (here / "commit.txt").read_text().strip(), "date": "2026-12-05",
           "device": f"{dev} (lavapipe, Vulkan via Dawn in Node, not a browser; 2-core 24 GiB machine)",
           "label": LABEL, "rows": rows}, open(here / "summary.json", "w"), indent=1)
print(f"{len(rows)} rows")
