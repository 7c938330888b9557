#!/usr/bin/env python3
"""Tiny random Qwen3.5 text model and transformers reference data for tests/e2e/qwen35_parity_test.cpp.

Writes
  tests/fixtures/qwen35_tiny/            HF directory: config.json, model.safetensors (float32),
                                         generation_config.json, tokenizer.json (tiny byte-level BPE)
  tests/fixtures/parity/qwen35_tiny_ref.json
      per prompt: token ids, the last position's logits (float32 values of the float64 model), the
      64-step greedy continuation (KV/recurrent cache, one token per step, EOS not special) and its
      smallest top-1/top-2 margin; plus the versions used.

The model (Qwen3_5ForCausalLM, model_type qwen3_5_text) has 4 layers [linear, full, linear, linear],
odd sizes (hidden 68, 3 query heads / 1 KV head of 24 with partial rotary 0.25 -> 6 dims, linear
2 key heads x 12 / 4 value heads x 20, conv kernel 4) and weights drawn with larger scales than the
default init so logits are spread (clear greedy margins). Transformers runs its torch paths
(torch_chunk_gated_delta_rule for prompts, torch_recurrent_gated_delta_rule for decode steps, torch
conv1d): flash-linear-attention and causal-conv1d are not installed. The model runs in float64 except
the delta rule, which transformers computes in float32 (it casts there).

Usage: python3 tools/make_qwen35_fixtures.py [REPO_ROOT]
Needs: torch, transformers==5.17.0, safetensors, tokenizers.
"""
import json, os, platform, sys

import numpy as np
import torch
import transformers
from transformers import Qwen3_5ForCausalLM
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
MODEL_DIR = os.path.join(ROOT, "tests/fixtures/qwen35_tiny")
REF = os.path.join(ROOT, "tests/fixtures/parity/qwen35_tiny_ref.json")
STEPS = 64
SEED = 1234


def make_config():
    return Qwen3_5TextConfig(
        vocab_size=300, hidden_size=68, intermediate_size=92, num_hidden_layers=4,
        num_attention_heads=3, num_key_value_heads=1, head_dim=24,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=12, linear_value_head_dim=20,
        linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
        max_position_embeddings=512, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        bos_token_id=None, eos_token_id=None, pad_token_id=None)


def randomize(model, g):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(0.05, 4.0, generator=g).log())
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif "conv1d" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif "norm" in name:  # (1 + w) norms and the gated norm's plain w
                p.copy_((1.0 if "linear_attn.norm" in name else 0.0) + torch.randn(p.shape, generator=g) * 0.2)
            elif name.endswith("embed_tokens.weight"):
                p.copy_(torch.randn(p.shape, generator=g))
            else:  # Linear [out, in]
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(p.shape[1]))


def make_tokenizer(path):
    """A byte-level BPE over the 256 bytes plus merges learned from a short text; vocab 300 with the
    special token <|endoftext|> (id 299) (so the CLI can run the fixture)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["The quick brown fox jumps over the lazy dog. " * 4, "What is the capital of France? Paris is. " * 4,
            "Call me Ishmael. Some years ago, never mind how long precisely. " * 3]
    trainer = trainers.BpeTrainer(vocab_size=299, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[], show_progress=False)
    tok.train_from_iterator(text, trainer)
    tok.add_special_tokens(["<|endoftext|>"])
    tok.save(path)
    return tok


def main():
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    os.makedirs(MODEL_DIR, exist_ok=True)
    tok = make_tokenizer(os.path.join(MODEL_DIR, "tokenizer.json"))
    eos = tok.token_to_id("<|endoftext|>")
    cfg = make_config()
    cfg.eos_token_id = eos
    assert tok.get_vocab_size() <= cfg.vocab_size, tok.get_vocab_size()
    model = Qwen3_5ForCausalLM(cfg).to(torch.float32).eval()
    randomize(model, g)
    model.save_pretrained(MODEL_DIR, safe_serialization=True)

    gp = torch.Generator().manual_seed(SEED + 1)
    prompts = [
        ("short", [int(x) for x in torch.randint(0, 300, (7,), generator=gp)]),
        ("medium", [int(x) for x in torch.randint(0, 300, (45,), generator=gp)]),
        ("long", [int(x) for x in torch.randint(0, 300, (150,), generator=gp)]),  # chunks 64 + 64 + 22
    ]
    m64 = model.to(torch.float64)
    res = {"model": "qwen35_tiny (random init, seed %d)" % SEED, "dtype": "float64 (delta rule float32 in transformers)",
           "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
           "numpy": np.__version__, "eos_token_id": eos, "prompts": []}
    with torch.no_grad():
        for name, ids in prompts:
            out = m64(torch.tensor([ids]), use_cache=True)
            last = out.logits[0, -1]
            past, nxt = out.past_key_values, int(torch.argmax(last))
            greedy, margins = [], []
            for _ in range(STEPS):
                greedy.append(nxt)
                o = m64(torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
                past, lg = o.past_key_values, o.logits[0, -1]
                top2 = torch.topk(lg, 2).values
                margins.append(float(top2[0] - top2[1]))
                nxt = int(torch.argmax(lg))
            res["prompts"].append({"name": name, "ids": ids, "logits": [float(np.float32(v)) for v in last.tolist()],
                                   "greedy": greedy, "min_greedy_margin": min(margins),
                                   "max_abs_logit": float(last.abs().max())})
            print(name, len(ids), "top1", int(torch.argmax(last)), "min margin %.3g" % min(margins),
                  "max|logit| %.2f" % float(last.abs().max()), "greedy[:8]", greedy[:8], flush=True)
    with open(REF, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
