#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, made from the repo's test fixtures (nothing downloaded).

    fuzz/make_seeds.py BUILD_DIR      (BUILD_DIR = the fuzz build, e.g. build-fuzz)

Writes BUILD_DIR/corpus/<target>/ (rewritten on every run; libFuzzer adds what it finds there):
  gguf, safetensors     the committed tiny seeds of fuzz/corpus/<target>
  tokenizer_json        every tokenizer.json under tests/fixtures
  gguf_tokenizer        fuzz/corpus/gguf (its tokenizer.* keys) + GGUF files holding only the
                        tokenizer of each fixture tokenizer.json (model "gpt2", tokens, token_type,
                        merges, special ids) and a small SentencePiece-style ("llama") vocabulary
  chat_template         tests/fixtures/chat/templates/*.jinja, the chat_template of every fixture
                        tokenizer_config.json, and the template of every case in
                        tests/fixtures/chat/jinja_goldens.json
  session_file          sessions of 1 and 3 turns saved by BUILD_DIR/fuzz/fuzz_session_file
                        (WGLLM_FUZZ_SESSION_SEEDS) for the tiny Qwen3.5 fixture
plus fuzz/corpus/<target> and fuzz/crashes/<target> (regression inputs) where they exist.
"""
import glob
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
TARGETS = ["gguf", "safetensors", "tokenizer_json", "gguf_tokenizer", "chat_template", "session_file"]


def put(out_dir, data, name=None):
    if isinstance(data, str):
        data = data.encode("utf-8")
    name = name or hashlib.sha1(data).hexdigest()
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)


# ---- a minimal GGUF v3 writer (metadata only, no tensors), per the GGUF spec
def gguf_str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gguf_value(v):
    """(type id, payload) of a metadata value: str, bool, int (u32/i32), float (f32), list."""
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, str):
        return 8, gguf_str(v)
    if isinstance(v, int):
        return (4, struct.pack("<I", v)) if v >= 0 else (5, struct.pack("<i", v))
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, list):
        et = gguf_value(v[0])[0] if v else 8
        return 9, struct.pack("<IQ", et, len(v)) + b"".join(gguf_value(x)[1] for x in v)
    raise TypeError(v)


def gguf_file(kv):
    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for k, v in kv.items():
        t, payload = gguf_value(v)
        out += gguf_str(k) + struct.pack("<I", t) + payload
    return out


def gguf_from_tokenizer_json(path):
    tj = json.load(open(path, encoding="utf-8"))
    vocab = tj["model"]["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = max(list(vocab.values()) + list(added.keys())) + 1
    tokens = [""] * n
    types = [1] * n
    for t, i in vocab.items():
        tokens[i] = t
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = 3 if a.get("special") else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"].get("merges", [])]
    kv = {"general.architecture": "qwen2", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
          "tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges,
          "tokenizer.ggml.add_bos_token": False}
    for i, t in enumerate(tokens):
        if t in ("<|endoftext|>", "<|im_end|>"):
            kv["tokenizer.ggml.eos_token_id"] = i
    return gguf_file(kv)


def gguf_spm():
    """A small SentencePiece-style vocabulary: specials, 256 byte tokens, a few scored pieces."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256
    scores = [0.0] * len(tokens)
    for i, p in enumerate(["\u2581", "\u2581t", "he", "\u2581the", "\u2581a", "in", "\u2581in", "er", "on",
                           "\u2581Hello", "\u2581world", "o", "l", "e", "H", "w", "r", "d", "!", "1", "2"]):
        tokens.append(p)
        types.append(1)
        scores.append(-float(i))
    kv = {"general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
          "tokenizer.ggml.scores": scores, "tokenizer.ggml.token_type": types,
          "tokenizer.ggml.unknown_token_id": 0, "tokenizer.ggml.bos_token_id": 1, "tokenizer.ggml.eos_token_id": 2,
          "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_space_prefix": True}
    return gguf_file(kv)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    corpus = os.path.join(build, "corpus")
    dirs = {}
    for t in TARGETS:
        d = dirs[t] = os.path.join(corpus, t)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for sub in ("corpus", "crashes"):
            for p in glob.glob(os.path.join(ROOT, "fuzz", sub, t, "*")):
                shutil.copy(p, d)
    tok_jsons = sorted(glob.glob(os.path.join(FIX, "**", "tokenizer.json"), recursive=True))
    for p in tok_jsons:
        shutil.copy(p, os.path.join(dirs["tokenizer_json"], os.path.relpath(p, FIX).replace("/", "_")))
        put(dirs["gguf_tokenizer"], gguf_from_tokenizer_json(p))
    put(dirs["gguf_tokenizer"], gguf_spm(), "spm_small.gguf")
    for p in glob.glob(os.path.join(ROOT, "fuzz", "corpus", "gguf", "*")):
        shutil.copy(p, dirs["gguf_tokenizer"])
    for p in sorted(glob.glob(os.path.join(FIX, "chat", "templates", "*.jinja"))):
        shutil.copy(p, dirs["chat_template"])
    for p in sorted(glob.glob(os.path.join(FIX, "**", "tokenizer_config.json"), recursive=True)):
        t = json.load(open(p, encoding="utf-8")).get("chat_template")
        if isinstance(t, str):
            put(dirs["chat_template"], t)
    for case in json.load(open(os.path.join(FIX, "chat", "jinja_goldens.json"), encoding="utf-8")):
        put(dirs["chat_template"], case["source"])
    exe = os.path.join(build, "fuzz", "fuzz_session_file")
    env = dict(os.environ, WGLLM_FUZZ_SESSION_SEEDS=os.path.abspath(dirs["session_file"]))
    subprocess.run([exe], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for t in TARGETS:
        files = os.listdir(dirs[t])
        print("seeds %-15s %4d files %9d bytes" % (t, len(files),
              sum(os.path.getsize(os.path.join(dirs[t], f)) for f in files)))


if __name__ == "__main__":
    main()
