#!/usr/bin/env python3
"""Where the model file's tensors lie relative to 2^32 bytes (layout.json): the tensors whose data
ends past 4 GiB, and for the output head (output.weight, the last tensor) the first vocabulary row
stored past 2^32 and, given greedy.json, whether each greedy token's head row lies past 2^32 (so
that its logit was computed from bytes the streaming loader read at offsets beyond 32 bits).
Usage: layout.py MODEL.gguf (run by recipe.sh before the file is deleted)."""
import json
import pathlib
import sys

here = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(here.parents[2] / "tools" / "synth"))
import gguf_io as g  # noqa: E402

with open(sys.argv[1], "rb") as f:
    h, data_start = g.read_header(f)
G4 = 2 ** 32
out = {"file": sys.argv[1], "data_start": data_start, "tensors": len(h.tensors), "past_4gib": []}
for t in h.tensors:
    start = data_start + t.offset
    if start + t.nbytes > G4:
        out["past_4gib"].append({"name": t.name, "type": g.GGML_TYPES[t.type][0], "file_offset": start,
                                 "nbytes": t.nbytes, "bytes_past_4gib": start + t.nbytes - max(start, G4)})
head = next(t for t in h.tensors if t.name == "output.weight")
n_rows = head.shape[1]
row_bytes = head.nbytes // n_rows
start = data_start + head.offset
first = -(-(G4 - start) // row_bytes)  # first row whose bytes all lie at offsets >= 2^32
out["output_head"] = {"file_offset": start, "row_bytes": row_bytes, "rows": n_rows,
                      "first_row_entirely_past_4gib": first, "rows_entirely_past_4gib": n_rows - first}
gp = here / "greedy.json"
if gp.exists():
    ids = json.load(open(gp)).get("greedy", {}).get("token_ids", [])
    out["greedy_head_rows"] = [{"token_id": i, "row_file_offset": start + i * row_bytes,
                                "row_past_4gib": start + i * row_bytes >= G4} for i in ids]
json.dump(out, open(here / "layout.json", "w"), indent=1)
print(json.dumps(out["output_head"]), out.get("greedy_head_rows"))
