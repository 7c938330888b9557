#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/coop_summary.py DIR (a results folder with commit.txt and raw/callNN/, each
the unpacked results.tgz of one device call: tools/device/recipes/coop.sh or the commands in DIR/README.md). Writes
DIR/summary.json (the shape of ../shared/RESULTS.md) from every call folder:
  probe.txt                tools/probes/coop_matrix_probe: 1 when requestDevice granted the cooperative matrices, else 0
  matmul_<shapes>.json     `bench matmul --coop --int8` (q4_K): per variant and shape its median time (op alone)
  coop_<model>_<n>.json    `bench ab` TTFT of an n-token prompt, A = product, B = --matmul-coop (wgllm = B)
  coopx_<model>_<n>.json   `bench ab` TTFT, A = --matmul-coop, B = --matmul-coop with the tile of coop_best_tile.txt
  decode_ctl.json          `bench ab` decode after 512, A = product, B = --matmul-coop (a control)
  multiturn_<model>.json   `bench multi-turn --turns 30` (session TTFT turn 30 / turn 2, one run)
  turns_null_<model>.json  `bench ab` of `bench multi-turn --turns 30 --session-only`, B = A = product (a null control
                           whose arms give the spread of turn 30 / turn 2: every run's value in the row's context)
  keys8_<model>_<n>.json   `bench ab` TTFT of an n-token prompt, A = product, B = --attn-flash-lanes-keys 8
  prefill_<model>.json     `bench --prefill-profile`: the TTFT and each kernel label's GPU time over the whole prefill
The GPU from the first call's gpu_before.txt. Every model file is a synthetic-weights file (tools/synth)."""
import glob
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, median, multiturn_rows, op_rows, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1])
rows = []
calls = sorted(p for p in (here / "raw").iterdir() if p.is_dir() and p.name.startswith("call"))


def synth(model):
    return f"{model}.synthetic.gguf"


for call in calls:
    new = []
    probe = call / "probe.txt"
    if probe.exists():
        text = probe.read_text()
        granted = "with CooperativeMatrix: granted" in text
        listed = "lists CooperativeMatrix (0x0003003B): yes" in text
        new.append({"model": "none (probe kernel)", "weights": "synthetic", "metric": "coop_matrix_granted",
                    "context": ("adapter lists the feature; " if listed else "adapter does not list the feature; ")
                    + " ".join(line.strip() for line in text.splitlines() if "experimental" in line or "refused" in line),
                    "wgllm": 1 if granted else 0, "ratio_ci": None, "config": "tools/probes/coop_matrix_probe",
                    "source": "probe.txt"})
    for f in sorted(glob.glob(str(call / "matmul_*.json"))):
        new += op_rows(f, "Qwen2.5-1.5B / Qwen3.5-2B prefill shapes (q4_K, random blocks)")
    for f in sorted(glob.glob(str(call / "*.json"))):
        stem = pathlib.Path(f).stem
        parts = stem.split("_")
        if parts[0] in ("coop", "coopx") and len(parts) == 3:
            peer = "product (int8 tiles)" if parts[0] == "coop" else "--matmul-coop (64x64 tile)"
            cfg = "switch --matmul-coop" if parts[0] == "coop" else "switch --matmul-coop + tile (coop_best_tile.txt)"
            new += ab_rows(f, synth(parts[1]), f"prompt {parts[2]}", peer, True, cfg)
        elif stem == "decode_ctl":
            new += ab_rows(f, synth("qwen25-1.5b"), "prompt 512, decode (control)", "product", True, "switch --matmul-coop")
        elif parts[0] == "keys8" and len(parts) == 3:
            new += ab_rows(f, synth(parts[1]), f"prompt {parts[2]}", "product", True, "switch --attn-flash-lanes-keys 8")
        elif stem.startswith("turns_null_"):
            model = stem[len("turns_null_"):]
            j = json.load(open(f))
            for r in ab_rows(f, synth(model), "session-only, 30 turns", "product (null control: B = A)", True):
                m = j["metrics"][r["metric"]]
                vals = sorted(m["a1"] + m["a2"] + m["b"])
                r["context"] += f"; all {len(vals)} runs: median {median(vals):.4f}, " + ", ".join(f"{v:.4f}" for v in vals)
                new.append(r)
        elif parts[0] == "multiturn":
            for r in multiturn_rows(f):
                r["model"], r["weights"] = synth("_".join(parts[1:])), "synthetic"
                new.append(r)
        elif parts[0] == "prefill":
            model = "_".join(parts[1:])
            for run in json.load(open(f)).get("runs", []):
                p = run.get("prefill_profile")
                if not p:
                    continue
                ctx = f"prompt {run['n_prompt']}, {p['forwards']} forwards of <= {p['chunk']}"
                new.append({"model": synth(model), "weights": "synthetic", "metric": "ttft_ms", "context": ctx,
                            "wgllm": run["ttft_ms_median"], "ratio_ci": None, "config": "product", "source": pathlib.Path(f).name})
                new.append({"model": synth(model), "weights": "synthetic", "metric": "prefill_gpu_us", "context": ctx,
                            "wgllm": p["gpu_us"], "ratio_ci": None, "config": "product", "source": pathlib.Path(f).name})
                for k in p["kernels"]:
                    new.append({"model": synth(model), "weights": "synthetic", "metric": "prefill_kernel_gpu_us",
                                "context": f"{ctx}: {k['kernel']} x{k['dispatches']}", "wgllm": k["gpu_us"],
                                "ratio_ci": None, "config": "product", "source": pathlib.Path(f).name})
    for r in new:
        r["source"] = f"{call.name}/{r['source']}"
        rows.append(r)
gpu = next((c / "gpu_before.txt" for c in calls if (c / "gpu_before.txt").exists()), None)
if gpu is None:
    sys.exit("no call folder has gpu_before.txt")
write_summary(here, rows, gpu_file=str(gpu.relative_to(here / "raw")))
