#!/usr/bin/env python3
"""Tiny random-initialised LFM2 fixtures for tests/e2e/lfm2_parity_test.cpp.

Builds a 4-layer LFM2 (transformers `lfm2`, layer pattern conv, attention, conv, attention) with
odd sizes that catch indexing bugs (hidden 72, 3 query heads / 1 KV head of 24, conv L 3,
vocab 300, FFN 136 via block_auto_adjust_ff_dim from intermediate_size 204) and writes to
tests/fixtures/lfm2_tiny/:
  hf/config.json, hf/model.safetensors (float32), hf/tokenizer.json, hf/tokenizer_config.json
      the Hugging Face directory (tokenizer: a 300-entry byte-level BPE trained here, ChatML template)
  lfm2_tiny.f32.gguf   the same weights as GGUF (llama.cpp names via gguf-py's tensor map, the
                       conv weight squeezed to {L, hidden} as convert_hf_to_gguf.py does, F32)
  ref.json             transformers (float64) reference: per prompt the ids, the last-token logits,
                       a 64-step greedy continuation (full recompute per step, no cache) and the
                       smallest top-1/top-2 margin along it; plus the library versions.
Usage: python3 tools/make_lfm2_fixtures.py [OUT_DIR]   (needs torch, transformers, tokenizers, gguf,
safetensors; run in a venv outside the repository). Deterministic (fixed seeds).
"""
import importlib.metadata, json, os, platform, sys

import numpy as np
import torch
import transformers
from transformers import Lfm2Config, Lfm2ForCausalLM, PreTrainedTokenizerFast
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "fixtures", "lfm2_tiny")
VOCAB = 300
SPECIALS = ["<|pad|>", "<|startoftext|>", "<|im_end|>", "<|im_start|>"]  # ids 0..3 (pad, bos, eos, ...)
CHAT_TEMPLATE = ("{{- bos_token -}}{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + "
                 "'<|im_end|>\n' -}}{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}"
                 "{%- endif -%}")
TEXT = """Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my
purse, and nothing particular to interest me on shore, I thought I would sail about a little and see the
watery part of the world. It is a way I have of driving off the spleen and regulating the circulation.
Whenever I find myself growing grim about the mouth; whenever it is a damp, drizzly November in my soul;
whenever I find myself involuntarily pausing before coffin warehouses, then, I account it high time to get
to sea as soon as I can. The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) [ ] { }"""


def build_tokenizer(d):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([TEXT] * 4, tr)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"bos_token": SPECIALS[1], "eos_token": SPECIALS[2], "pad_token": SPECIALS[0],
               "chat_template": CHAT_TEMPLATE, "tokenizer_class": "PreTrainedTokenizerFast"},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))


def build_model():
    cfg = Lfm2Config(vocab_size=VOCAB, hidden_size=72, intermediate_size=204, num_hidden_layers=4,
                     num_attention_heads=3, num_key_value_heads=1, max_position_embeddings=512,
                     norm_eps=1e-5, conv_bias=False, conv_L_cache=3, block_multiple_of=8,
                     block_ffn_dim_multiplier=1.0, block_auto_adjust_ff_dim=True,
                     layer_types=["conv", "full_attention", "conv", "full_attention"],
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                     pad_token_id=0, bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)
    torch.manual_seed(1234)
    m = Lfm2ForCausalLM(cfg).eval()
    with torch.no_grad():  # larger than the default init so that logits are O(1..10), margins clear
        for n, p in m.named_parameters():
            if n.endswith("norm.weight") or "layernorm" in n:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif "embed_tokens" in n:
                p.copy_(0.3 * torch.randn_like(p))  # a smaller residual start: greedy does not lock onto the input token
            elif "conv.conv" in n:
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[-1] ** 0.5)
    return m


def write_gguf(m, tok, path):
    c = m.config
    sd = {k: v.detach().to(torch.float32).numpy() for k, v in m.state_dict().items()}
    w = gguf.GGUFWriter(path, "lfm2")
    w.add_name("lfm2-tiny-random")
    w.add_block_count(c.num_hidden_layers)
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_feed_forward_length(sd["model.layers.0.feed_forward.w1.weight"].shape[0])
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv([c.num_key_value_heads if t == "full_attention" else 0 for t in c.layer_types])
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_layer_norm_rms_eps(c.norm_eps)
    w.add_shortconv_l_cache(c.conv_L_cache)
    w.add_vocab_size(c.vocab_size)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    vocab = tok.backend_tokenizer.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    merges = json.loads(tok.backend_tokenizer.to_str())["model"]["merges"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in SPECIALS else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges([" ".join(x) if isinstance(x, list) else x for x in merges])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_pad_token_id(0)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LFM2, c.num_hidden_layers)
    for k, v in sd.items():
        if k == "lm_head.weight":
            continue  # tied
        base, suffix = k.rsplit(".", 1)
        name = names.get_name(base)
        assert name is not None, k
        if "conv.conv" in k:
            v = v.squeeze(1)  # [hidden, 1, L] -> [hidden, L]
        w.add_tensor(name + "." + suffix, np.ascontiguousarray(v))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    hf = os.path.join(OUT, "hf")
    os.makedirs(hf, exist_ok=True)
    tok = build_tokenizer(hf)
    m = build_model()
    m.save_pretrained(hf, safe_serialization=True)
    write_gguf(m, tok, os.path.join(OUT, "lfm2_tiny.f32.gguf"))
    md = m.to(torch.float64)
    long_text = (TEXT.replace("\n", " ") + " ") * 2
    prompts = [("one", tok.encode("C")[:1]),
               ("short", tok.encode("Call me Ishmael. Some years ago")),
               ("long", tok.encode(long_text)[:150])]
    res = {"transformers": transformers.__version__, "torch": torch.__version__, "gguf": importlib.metadata.version("gguf"), "python": platform.python_version(), "dtype": "float64",
           "config": {k: v for k, v in m.config.to_dict().items() if not k.startswith("_")}, "prompts": []}
    with torch.no_grad():
        for name, ids in prompts:
            seq = list(ids)
            out = md(torch.tensor([seq])).logits[0, -1]
            last = out.to(torch.float32).tolist()
            greedy, margins = [], []
            lg = out
            for _ in range(64):
                top2 = torch.topk(lg, 2).values
                margins.append(float(top2[0] - top2[1]))
                nxt = int(torch.argmax(lg))
                greedy.append(nxt)
                seq.append(nxt)
                lg = md(torch.tensor([seq])).logits[0, -1]
            res["prompts"].append({"name": name, "ids": list(ids), "logits": last, "greedy": greedy,
                                   "min_greedy_margin": min(margins)})
            print(f"{name}: T={len(ids)} max|logit| {max(abs(x) for x in last):.2f} min margin {min(margins):.2e} "
                  f"greedy[:8] {greedy[:8]}")
    json.dump(res, open(os.path.join(OUT, "ref.json"), "w"))


if __name__ == "__main__":
    main()
