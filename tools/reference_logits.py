#!/usr/bin/env python3
"""Reference logits from transformers for the engine's parity tests (run on the H200 machine).

Loads a GGUF model with transformers' GGUF loader (dequantizes to float, un-permutes Q/K), casts it
to float64 and, for each prompt of a prompts JSON (token ids produced by `wgllm tokenize`), writes:
  - <out>/<stem>_<name>.f32: the last prompt position's logits, float32 little-endian (vocab values)
  - <out>/<stem>_ref.json:   per prompt the greedy continuation (64 argmax steps, EOS not treated
                             specially), the top-5 of the last logits, and the environment.
Usage: python3 tools/reference_logits.py GGUF PROMPTS_JSON OUT_DIR [--steps 64]
Needs: torch, transformers, gguf (carry the gguf wheel to the H200 machine).
"""
import argparse, json, os, platform, sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("prompts")
    ap.add_argument("out")
    ap.add_argument("--steps", type=int, default=64)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    d, f = os.path.split(os.path.abspath(a.gguf))
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, torch_dtype=torch.float32)
    model = model.to(torch.float64).eval()
    spec = json.load(open(a.prompts))
    stem = os.path.splitext(os.path.basename(a.prompts))[0].replace("_prompts", "")
    res = {"model": f, "dtype": "float64", "torch": torch.__version__,
           "transformers": transformers.__version__, "python": platform.python_version(),
           "config": model.config.to_dict(), "prompts": []}
    with torch.no_grad():
        for p in spec["prompts"]:
            ids = torch.tensor([p["ids"]], dtype=torch.long)
            out = model(ids, use_cache=True)
            last = out.logits[0, -1].to(torch.float32).numpy()
            last.astype("<f4").tofile(os.path.join(a.out, f"{stem}_{p['name']}.f32"))
            past = out.past_key_values
            nxt = int(torch.argmax(out.logits[0, -1]))
            greedy, margins = [], []
            for _ in range(a.steps):
                greedy.append(nxt)
                o = model(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past = o.past_key_values
                lg = o.logits[0, -1]
                top2 = torch.topk(lg, 2).values
                margins.append(float(top2[0] - top2[1]))
                nxt = int(torch.argmax(lg))
            top = np.argsort(-last)[:5]
            res["prompts"].append({"name": p["name"], "n_prompt": len(p["ids"]), "greedy": greedy,
                                   "min_greedy_margin": min(margins),
                                   "top5": [[int(i), float(last[i])] for i in top]})
            print(p["name"], "top5", res["prompts"][-1]["top5"][:3], "min margin", min(margins), flush=True)
    json.dump(res, open(os.path.join(a.out, f"{stem}_ref.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
