#!/usr/bin/env python3
"""Writes summary.json for this folder from the per-run summaries that tools/device/summarize.py
wrote on the device (each from that run's raw files, kept beside it):
  node_default/        the browser engine under Dawn in Node vs native, product configuration (call 27)
  node_no_robustness/  the same call, Dawn device toggle disable_robustness (a diagnostic: browsers
                       always keep the bounds checks), config named accordingly
  node_first_0d978e3/  the first run of the session (call 21; wasm of 0d978e3 + the llama path of 3b9b52f)
  node_decode_pipeline_off/  the browser build's decode pipeline off (call 33, one round, wasm of call 27)
Usage: python3 make_summary.py   (in this folder)"""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = [("node_default", None, "call 27"),
        ("node_no_robustness", "non-product: Dawn toggle disable_robustness (diagnostic; browsers keep the checks)", "call 27"),
        ("node_first_0d978e3", None, "call 21"),
        ("node_decode_pipeline_off", "browser build with decodePipeline off (web/node/bench.mjs --decode-pipeline 0), 1 round", "call 33")]
rows, meta = [], None
for d, config, call in RUNS:
    s = json.load(open(os.path.join(HERE, d, "summary.json")))
    meta = meta or s
    for r in s["rows"]:
        r = dict(r)
        if config:
            r["config"] = config
        r["context"] = f"{r['context']}, {call}"
        r["source"] = f"{d}/{r.get('source', '')}"
        rows.append(r)
out = {"commit": "3b9b52f", "date": meta["date"], "device": meta["device"], "rows": rows}
json.dump(out, open(os.path.join(HERE, "summary.json"), "w"), indent=1)
print(f"summary.json: {len(rows)} rows")
