#!/usr/bin/env python3
"""Generates golden fixtures for src/formats tests with the reference gguf-py package.

    pip install gguf numpy   (tested with gguf 0.17 / gguf-py in llama.cpp)
    python3 tools/make_format_goldens.py [path/to/SmolLM2-135M-Instruct.Q4_1.gguf]

Writes under tests/fixtures/formats/:
  quant_<type>.bin   raw blocks (fixed seed, realistic f16 scales, random quants)
  quant_<type>.f32   gguf.quants.dequantize() of those bytes, float32 little-endian
  smollm2_q4_1.json  metadata + dequantized samples of a few tensors of the real model:
                     values as float32 bit patterns (uint32), sha256 of the whole dequantized
                     tensor as float32 LE bytes.
and tiny libFuzzer seeds under fuzz/corpus/{gguf,safetensors}/ (a mini GGUF with the real
model's scalar metadata, a few vocab entries and one small tensor per supported type).
Run once; the outputs are committed. Rerunning must reproduce them byte for byte.
"""
import hashlib
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "formats")


def f16_bytes(x):
    return np.asarray(x, dtype=np.float16).view(np.uint8).reshape(len(x), 2)


def make_quant_blocks(rng, qtype, n_blocks):
    """Raw bytes of n_blocks blocks of qtype, laid out as ggml-common.h block_* structs."""
    u8 = lambda *shape: rng.integers(0, 256, size=shape, dtype=np.uint8)
    scale = lambda lo, hi, signed=False: (rng.uniform(lo, hi, n_blocks) *
                                          (rng.choice([-1, 1], n_blocks) if signed else 1))
    if qtype == Q.Q8_0:   # {f16 d; i8 qs[32]}
        parts = [f16_bytes(scale(1e-4, 2e-2, True)), u8(n_blocks, 32)]
    elif qtype == Q.Q4_0:  # {f16 d; u8 qs[16]}
        parts = [f16_bytes(scale(1e-4, 2e-2, True)), u8(n_blocks, 16)]
    elif qtype == Q.Q4_1:  # {f16 d; f16 m; u8 qs[16]}
        parts = [f16_bytes(scale(1e-4, 2e-2)), f16_bytes(rng.uniform(-0.2, 0.1, n_blocks)),
                 u8(n_blocks, 16)]
    elif qtype == Q.Q4_K:  # {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}
        parts = [f16_bytes(scale(1e-5, 1e-3)), f16_bytes(scale(1e-5, 1e-3)), u8(n_blocks, 12),
                 u8(n_blocks, 128)]
    elif qtype == Q.Q6_K:  # {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}
        parts = [u8(n_blocks, 128), u8(n_blocks, 64), u8(n_blocks, 16),
                 f16_bytes(scale(1e-5, 1e-3, True))]
    else:
        raise ValueError(qtype)
    return np.concatenate(parts, axis=1)


def write_quant_fixtures():
    rng = np.random.default_rng(20240611)
    n = 1024  # elements per type
    cases = {}
    # plain float types: random bits, excluding NaN encodings (their payload handling is
    # implementation-defined in numpy's f16 path), plus signed zeros, infinities, subnormals.
    f32 = rng.standard_normal(n).astype(np.float32) * np.float32(0.05)
    f32[:6] = [0.0, -0.0, np.inf, -np.inf, 1e-40, -3.4e38]
    cases["f32"] = (Q.F32, f32.view(np.uint8))
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    h = np.where((h & 0x7C00) == 0x7C00, h & 0xFC00, h).astype(np.uint16)  # NaN -> inf
    h[:4] = [0x0000, 0x8000, 0x0001, 0x83FF]
    cases["f16"] = (Q.F16, h.view(np.uint8))
    b = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    b = np.where((b & 0x7F80) == 0x7F80, b & 0xFF80, b).astype(np.uint16)
    cases["bf16"] = (Q.BF16, b.view(np.uint8))
    for name, qt in [("q8_0", Q.Q8_0), ("q4_0", Q.Q4_0), ("q4_1", Q.Q4_1), ("q4_K", Q.Q4_K),
                     ("q6_K", Q.Q6_K)]:
        be, bb = gguf.GGML_QUANT_SIZES[qt]
        raw = make_quant_blocks(rng, qt, n // be)
        assert raw.shape[1] == bb, (name, raw.shape)
        cases[name] = (qt, raw.reshape(-1))
    for name, (qt, raw) in cases.items():
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        be, bb = gguf.GGML_QUANT_SIZES[qt]
        out = dequantize(raw.reshape(-1, bb), qt).astype("<f4").reshape(-1)
        assert out.size == n, (name, out.size)
        raw.tofile(os.path.join(OUT, f"quant_{name}.bin"))
        out.tofile(os.path.join(OUT, f"quant_{name}.f32"))


def bits(a):
    return [int(x) for x in np.asarray(a, dtype="<f4").view("<u4")]


def write_model_goldens(path):
    r = gguf.GGUFReader(path)
    meta = {}
    for k in ["llama.block_count", "llama.embedding_length", "llama.attention.head_count",
              "llama.attention.head_count_kv", "llama.vocab_size", "llama.context_length",
              "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"]:
        meta[k] = int(r.fields[k].contents())
    meta["general.architecture"] = r.fields["general.architecture"].contents()
    meta["llama.rope.freq_base"] = float(r.fields["llama.rope.freq_base"].contents())
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    merges = r.fields["tokenizer.ggml.merges"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    out = {
        "file": os.path.basename(path),
        "n_tensors": len(r.tensors),
        "data_offset": int(r.data_offset),
        "metadata": meta,
        "tokens_sample": {str(i): toks[i] for i in [0, 1, 2, 100, 1000, 49151]},
        "merges_sample": {str(i): merges[i] for i in [0, 1, 48899]},
        "token_type_sample": {str(i): int(types[i]) for i in [0, 1, 17, 49151]},
        "type_counts": {},
        "tensors": [],
    }
    for t in r.tensors:
        out["type_counts"][t.tensor_type.name] = out["type_counts"].get(t.tensor_type.name, 0) + 1
    chosen = ["token_embd.weight", "blk.0.attn_q.weight", "blk.17.ffn_down.weight",
              "blk.29.attn_v.weight", "blk.0.attn_norm.weight", "output_norm.weight"]
    by_name = {t.name: t for t in r.tensors}
    for name in chosen:
        t = by_name[name]
        ne = [int(x) for x in t.shape]  # ggml order, innermost first
        deq = dequantize(t.data, t.tensor_type).astype("<f4").reshape(-1, ne[0])
        rows = deq.shape[0]
        mid = rows // 2
        out["tensors"].append({
            "name": name, "type": t.tensor_type.name, "shape": ne,
            "offset": int(t.data_offset) - int(r.data_offset), "nbytes": int(t.n_bytes),
            "row0_first64": bits(deq[0, :64]),
            "mid_row": mid, "mid_row_cols_32_48": bits(deq[mid, 32:48]),
            "last_row_last8": bits(deq[-1, -8:]),
            "sha256_f32": hashlib.sha256(deq.tobytes()).hexdigest(),
        })
    with open(os.path.join(OUT, "smollm2_q4_1.json"), "w") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


def write_fuzz_seeds(path):
    import struct
    rng = np.random.default_rng(5)
    r = gguf.GGUFReader(path)
    seeds = os.path.join(ROOT, "fuzz", "corpus")
    os.makedirs(os.path.join(seeds, "gguf"), exist_ok=True)
    os.makedirs(os.path.join(seeds, "safetensors"), exist_ok=True)
    out = os.path.join(seeds, "gguf", "smollm2_mini.gguf")
    w = gguf.GGUFWriter(out, "llama")
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        t = f.types[0]
        if t == gguf.GGUFValueType.ARRAY:
            w.add_key_value(k, f.contents()[:12], t, sub_type=f.types[-1])
        elif k != "tokenizer.chat_template":
            w.add_key_value(k, f.contents(), t)
    w.add_tensor("norm.weight", rng.standard_normal(32).astype(np.float32))
    w.add_tensor("f16.weight", rng.standard_normal(32).astype(np.float16))
    w.add_tensor("bf16.weight", rng.integers(0, 256, 64, dtype=np.uint8),
                 raw_dtype=Q.BF16)
    for qt in [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q4_K, Q.Q6_K]:
        raw = make_quant_blocks(rng, qt, 1).reshape(-1)
        be, _ = gguf.GGML_QUANT_SIZES[qt]
        w.add_tensor(f"{qt.name.lower()}.weight", raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    hdr = json.dumps({
        "__metadata__": {"format": "pt"},
        "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
        "b": {"dtype": "BF16", "shape": [4], "data_offsets": [16, 24]},
        "c": {"dtype": "F16", "shape": [1, 2], "data_offsets": [24, 28]},
        "d": {"dtype": "I64", "shape": [1], "data_offsets": [28, 36]},
    }, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    data = rng.integers(0, 256, 36, dtype=np.uint8).tobytes()
    with open(os.path.join(seeds, "safetensors", "small.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr + data)


def main():
    os.makedirs(OUT, exist_ok=True)
    write_quant_fixtures()
    cache = os.environ.get("WGLLM_CACHE", os.path.expanduser("~/.cache/wgllm"))
    model = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        cache, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
    write_model_goldens(model)
    write_fuzz_seeds(model)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
