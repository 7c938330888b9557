#!/usr/bin/env python3
"""Writes a GGUF with a real model's tensor names, shapes, quant types and metadata and random,
sensibly scaled weights ("synthetic weights": the text is noise, the speed is real).

  write_gguf.py --header H.hdr.gz OUT.gguf [--seed N]
      (a) the exact header of a real GGUF (tools/synth/gguf_header.py): every metadata key and the
          tensor table (names, shapes, types, offsets) kept; general.name gets " (synthetic
          weights)" and wgllm.synthetic.* keys are added (offsets are relative to the data
          section, so the tensor table stays byte-identical).
  write_gguf.py --config C.json --vocab V.hdr.gz OUT.gguf [--seed N] [--set key=value ...]
      (b) a published config (tools/synth/configs/*.json: the HF config.json fields, with their
          source) for architectures llama, qwen2, gemma3, lfm2, qwen35: metadata and tensors as
          llama.cpp's convert_hf_to_gguf.py writes them, quant types as llama-quantize chooses for
          the config's ftype (Q4_K_M, Q8_0 or F16: see quant_type()); the tokenizer.* keys are
          taken from V (a real GGUF or extract), padded with unused tokens to vocab_size.
          --set overrides HF fields (JSON values), e.g. --set hidden_size=256 num_hidden_layers=4.

Weights (deterministic from --seed; each tensor from its own generator seeded (seed, index)):
  quantized blocks: random quants with block scales set so the dequantized values have mean ~0
    and standard deviation SIGMA = 0.02 (scales and minima are exact f16 / 6-bit values, the
    sub-block scales vary in [32, 63] (K-quants) so every scale field is exercised);
  f16 / bf16 / f32 matrices: N(0, SIGMA);  norm weights: 1 + N(0, 0.02) (GGUF norms are stored
    as applied: Gemma 3 / Qwen3.5 (1 + w) included);  biases: N(0, SIGMA);  conv kernels
    (shortconv.conv, ssm_conv1d): U(-1/sqrt(K), 1/sqrt(K)) (PyTorch's Conv1d init, fan_in K);
  Qwen3.5 ssm_a = -A with A ~ U(1, 16) (A_log = log U(0, 16) in transformers' init), ssm_dt.bias
    = 1 (torch.ones init).
Streaming: the header, then each tensor's data in chunks of <= 16 Mi elements; nothing else is held.
The file is then checked: parsed back, its tensor table equal to the planned one, its size exact.
"""
import argparse, json, os, sys, time

try:
    import numpy as np
except ImportError:
    raise SystemExit("write_gguf: needs numpy (scripts/setup.sh installs the pinned numpy==2.2.6)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402

SIGMA = 0.02
CHUNK = 1 << 24  # elements per generated chunk


# ---------------------------------------------------------------- block generators

def _f16(x):
    """x rounded to f16, as the uint16 bits and the value actually stored."""
    h = np.float16(x)
    if not np.isfinite(h) or h == 0:
        raise ValueError(f"scale {x} not representable in f16")
    return int(h.view(np.uint16)), float(h)


def _blocks(rng, n_blocks, block_bytes):
    return np.frombuffer(rng.bytes(n_blocks * block_bytes), np.uint8).reshape(n_blocks, block_bytes).copy()


def _put_u16(b, col, value):
    b[:, col] = value & 0xFF
    b[:, col + 1] = value >> 8


def _kquant_scales(rng, nb, dmin_over_d):
    """12-byte packed 6-bit (scale, min) pairs of 8 sub-blocks (ggml-quants.c get_scale_min_k4's
    inverse); sc in [32, 63], m = sc so d*sc*q - dmin*m has mean 0 when dmin = d * mean(q)."""
    sc = rng.integers(32, 64, size=(nb, 8), dtype=np.uint8)
    m = sc
    out = np.empty((nb, 12), np.uint8)
    out[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    out[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    out[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return out


def gen_blocks(rng, t, nb):
    """nb blocks of ggml type t (uint8 [nb, block_bytes]) with values ~ mean 0, std SIGMA."""
    bb = g.GGML_TYPES[t][2]
    b = _blocks(rng, nb, bb)
    if t == g.Q4_0:  # {f16 d; qs[16]}: (q - 8) d, std(q) = sqrt(255/12)
        _put_u16(b, 0, _f16(SIGMA / 4.61)[0])
    elif t == g.Q4_1:  # {d, m, qs[16]}: q d + m
        bits, d = _f16(SIGMA / 4.61)
        _put_u16(b, 0, bits)
        _put_u16(b, 2, _f16(-7.5 * d)[0])
    elif t == g.Q5_0:  # {d, qh[4], qs[16]}: (q - 16) d, std(q) = sqrt(1023/12)
        _put_u16(b, 0, _f16(SIGMA / 9.23)[0])
    elif t == 7:  # q5_1 {d, m, qh[4], qs[16]}: q d + m
        bits, d = _f16(SIGMA / 9.23)
        _put_u16(b, 0, bits)
        _put_u16(b, 2, _f16(-15.5 * d)[0])
    elif t == g.Q8_0:  # {d, i8 qs[32]}: q d, q uniform in [-128, 127]
        _put_u16(b, 0, _f16(SIGMA / 73.9)[0])
    elif t in (g.Q4_K, g.Q5_K):  # {d, dmin, scales[12], (qh[32]), qs[128]}: d sc q - dmin m
        qmean, qstd = (7.5, 4.61) if t == g.Q4_K else (15.5, 9.23)
        bits, d = _f16(SIGMA / (47.5 * qstd))
        _put_u16(b, 0, bits)
        _put_u16(b, 2, _f16(qmean * d)[0])
        b[:, 4:16] = _kquant_scales(rng, nb, qmean)
    elif t == g.Q6_K:  # {ql[128], qh[64], i8 scales[16], f16 d}: d sc (q - 32)
        b[:, 192:208] = rng.integers(32, 128, size=(nb, 16), dtype=np.uint8)
        _put_u16(b, 208, _f16(SIGMA / (79.5 * 18.47))[0])
    else:
        raise SystemExit(f"write_gguf: no generator for ggml type {g.GGML_TYPES[t][0]}")
    return b


def gen_floats(rng, role, n, shape):
    if role == "norm":
        return 1.0 + rng.standard_normal(n, dtype=np.float32) * 0.02
    if role == "conv":  # kernel width = shape[0] (ggml order {K, C})
        k = 1.0 / np.sqrt(shape[0])
        return rng.uniform(-k, k, n).astype(np.float32)
    if role == "ssm_a":
        return -rng.uniform(1.0, 16.0, n).astype(np.float32)
    if role == "dt_bias":
        return np.ones(n, np.float32)
    return rng.standard_normal(n, dtype=np.float32) * SIGMA


def role_of(name):
    if name.endswith("norm.weight") or name.endswith("_norm"):
        return "norm"
    if "shortconv.conv.weight" in name or "ssm_conv1d" in name:
        return "conv"
    if name.endswith(".ssm_a"):
        return "ssm_a"
    if name.endswith("ssm_dt.bias"):
        return "dt_bias"
    return "weight"


def write_tensor(f, rng, t):
    """Streams one tensor's data (t.nbytes bytes)."""
    name, be, bb = g.GGML_TYPES[t.type]
    n = int(np.prod(t.shape, dtype=np.int64)) if t.shape else 1
    role = role_of(t.name)
    if be > 1:
        if role != "weight":
            raise SystemExit(f"write_gguf: {t.name} ({role}) is quantized as {name}: not supported")
        nb, step = n // be, max(1, CHUNK // be)
        for i in range(0, nb, step):
            f.write(gen_blocks(rng, t.type, min(step, nb - i)).tobytes())
        return
    for i in range(0, n, CHUNK):
        x = gen_floats(rng, role, min(CHUNK, n - i), t.shape)
        if t.type == g.F32:
            f.write(x.astype("<f4").tobytes())
        elif t.type == g.F16:
            f.write(x.astype("<f2").tobytes())
        elif t.type == g.BF16:  # round to nearest even
            u = x.astype("<f4").view(np.uint32)
            f.write(((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes())
        else:
            raise SystemExit(f"write_gguf: no generator for {t.name} of type {name}")


def write_file(h, out, seed):
    """Writes header h (tensor offsets already packed) and random data for each tensor; returns bytes."""
    order = sorted(range(len(h.tensors)), key=lambda i: h.tensors[i].offset)
    expect = 0
    for i in order:  # the packed layout every GGUF reader expects (src/formats/gguf.cpp)
        t = h.tensors[i]
        if t.offset != expect:
            raise SystemExit(f"write_gguf: tensor {t.name} at offset {t.offset}, expected {expect} (not packed)")
        expect = g.pad(t.offset + t.nbytes, h.alignment)
    head = g.header_bytes(h)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head)
        for i in order:
            t = h.tensors[i]
            start = f.tell()
            write_tensor(f, np.random.default_rng([seed, i]), t)
            if f.tell() - start != t.nbytes:
                raise SystemExit(f"write_gguf: wrote {f.tell() - start} bytes for {t.name}, expected {t.nbytes}")
            f.write(b"\0" * (g.pad(t.nbytes, h.alignment) - t.nbytes))
    size = os.path.getsize(tmp)
    with open(tmp, "rb") as f:
        back, data_start = g.read_header(f)
        f.seek(0)
        same_head = f.read(len(head)) == head
    if (size != len(head) + expect or data_start != len(head) or not same_head
            or [t.key() for t in back.tensors] != [t.key() for t in h.tensors]):
        os.remove(tmp)
        raise SystemExit("write_gguf: the written file does not parse back to the planned header")
    os.replace(tmp, out)
    return size


def mark_synthetic(h, seed, source):
    name = h.get("general.name", h.get("general.architecture", "model"))
    h.set("general.name", g.STRING, f"{name} (synthetic weights)")
    h.set("wgllm.synthetic", g.BOOL, True)
    h.set("wgllm.synthetic.seed", g.UINT32, seed)
    h.set("wgllm.synthetic.source", g.STRING, source)


# ---------------------------------------------------------------- configs

# llama.cpp llama_ftype values (include/llama.h)
FTYPES = {"F16": 1, "Q8_0": 7, "Q4_K_M": 15}


class QuantState:
    """llama-quantize's counters (src/llama-quant.cpp quantize_state_impl): attention-v-like tensors
    (attn_v, attn_qkv) counted in file order, the output tensor's presence."""

    def __init__(self, tensors):
        self.n_attention_wv = sum(1 for n, *_ in tensors if "attn_v.weight" in n or "attn_qkv.weight" in n)
        self.i_attention_wv = 0
        self.tied = not any(n == "output.weight" for n, *_ in tensors)


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def quant_type(name, shape, ftype, qs, n_layer):
    """The type llama-quantize (llama.cpp src/llama-quant.cpp, llama_tensor_get_type and
    tensor_allows_quantization, vendored in llama-cpp-python 0.3.36) gives a tensor converted
    from F16/BF16 for `ftype` (default type Q4_K for Q4_K_M), with these rules applied:
      - 1-D tensors, *_norm.weight, names not ending in "weight", ssm_conv1d, shortconv.conv stay F32
        (convert_hf_to_gguf.py writes them F32);
      - output.weight, and token_embd.weight when there is no output.weight (tied): Q6_K (Q8_0
        for ftype Q8_0);
      - attn_v / attn_qkv (category "attention-v-like"; the later attn_qkv -> Q5_K branch is
        unreachable for Q4_K_M): Q6_K where use_more_bits(i_attention_wv, n_attention_wv);
      - ffn_down: Q6_K where use_more_bits(layer, n_layer) (non-Falcon, dense);
      - then tensor_type_fallback: innermost dim not a multiple of the block size -> Q4_K: Q5_0,
        Q6_K: Q8_0, and F16 if that does not fit either."""
    if (len(shape) < 2 or name.endswith("_norm.weight") or not name.endswith("weight")
            or "ssm_conv1d" in name or "shortconv.conv.weight" in name):
        return g.F32
    if ftype == "F16":
        return g.F16
    default = g.Q8_0 if ftype == "Q8_0" else g.Q4_K
    t = default
    if name == "output.weight" or (qs.tied and name == "token_embd.weight"):
        t = g.Q8_0 if default == g.Q8_0 or shape[0] % g.GGML_TYPES[default][1] else g.Q6_K
    elif ftype == "Q4_K_M":
        if "attn_v.weight" in name or "attn_qkv.weight" in name:
            if use_more_bits(qs.i_attention_wv, qs.n_attention_wv):
                t = g.Q6_K
            qs.i_attention_wv += 1
        elif "ffn_down" in name:
            layer = int(name.split(".")[1])
            if use_more_bits(layer, n_layer):
                t = g.Q6_K
    be = g.GGML_TYPES[t][1]
    if shape[0] % be:
        t = {g.Q4_K: g.Q5_0, g.Q6_K: g.Q8_0, g.Q5_K: 7}.get(t, t)  # 7 = q5_1
        if shape[0] % g.GGML_TYPES[t][1]:
            t = g.F16
    return t


def _arr_i32(v):
    return (g.ARRAY, (g.INT32, [int(x) for x in v]))


def hf_get(c, *keys, default=None):
    for k in keys:
        if k in c and c[k] is not None:
            return c[k]
    if default is None:
        raise SystemExit(f"write_gguf: config has none of {keys}")
    return default


def plan_llama_like(c, arch):
    """llama / qwen2 / gemma3 (convert_hf_to_gguf.py LlamaModel / Qwen2Model / Gemma3Model)."""
    d, L = c["hidden_size"], c["num_hidden_layers"]
    H = c["num_attention_heads"]
    kvh = c.get("num_key_value_heads") or H
    hd = c.get("head_dim") or d // H
    ff, V = c["intermediate_size"], c["vocab_size"]
    a = arch + "."
    kv = {a + "context_length": (g.UINT32, c.get("max_position_embeddings", 4096)),
          a + "embedding_length": (g.UINT32, d), a + "block_count": (g.UINT32, L),
          a + "feed_forward_length": (g.UINT32, ff), a + "attention.head_count": (g.UINT32, H),
          a + "attention.head_count_kv": (g.UINT32, kvh),
          a + "rope.freq_base": (g.FLOAT32, float(c.get("rope_theta", 10000.0))),
          a + "attention.layer_norm_rms_epsilon": (g.FLOAT32, float(c.get("rms_norm_eps", 1e-6)))}
    if hd != d // H or arch == "gemma3":
        kv[a + "attention.key_length"] = (g.UINT32, hd)
        kv[a + "attention.value_length"] = (g.UINT32, hd)
    if arch == "llama":
        kv[a + "vocab_size"] = (g.UINT32, V)
        kv[a + "rope.dimension_count"] = (g.UINT32, hd)
    if arch == "gemma3":
        kv[a + "attention.sliding_window"] = (g.UINT32, c.get("sliding_window", 512))
    ts = [("token_embd.weight", [d, V])]
    for i in range(L):
        p = f"blk.{i}."
        ts += [(p + "attn_norm.weight", [d]), (p + "attn_q.weight", [d, H * hd]), (p + "attn_k.weight", [d, kvh * hd]),
               (p + "attn_v.weight", [d, kvh * hd]), (p + "attn_output.weight", [H * hd, d])]
        if arch == "qwen2":
            ts += [(p + "attn_q.bias", [H * hd]), (p + "attn_k.bias", [kvh * hd]), (p + "attn_v.bias", [kvh * hd])]
        if arch == "gemma3":
            ts += [(p + "attn_q_norm.weight", [hd]), (p + "attn_k_norm.weight", [hd]),
                   (p + "post_attention_norm.weight", [d]), (p + "post_ffw_norm.weight", [d])]
        ts += [(p + "ffn_norm.weight", [d]), (p + "ffn_gate.weight", [d, ff]), (p + "ffn_up.weight", [d, ff]),
               (p + "ffn_down.weight", [ff, d])]
    ts.append(("output_norm.weight", [d]))
    if not c.get("tie_word_embeddings", True):
        ts.append(("output.weight", [d, V]))
    return kv, ts


def lfm2_ffn_dim(c):
    """convert_hf_to_gguf.py LFM2Model._add_feed_forward_length (= transformers Lfm2MLP)."""
    ff = hf_get(c, "block_ff_dim", "intermediate_size")
    if c.get("block_auto_adjust_ff_dim", True):
        ff = int(2 * ff / 3)
        if c.get("block_ffn_dim_multiplier") is not None:
            ff = int(c["block_ffn_dim_multiplier"] * ff)
        m = c.get("block_multiple_of", 256)
        ff = m * ((ff + m - 1) // m)
    return ff


def plan_lfm2(c):
    """llama.cpp arch `lfm2` (conversion/lfm2.py LFM2Model; src/models/lfm2.cpp load_arch_tensors)."""
    d, L, H = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kvh, V, K = c["num_key_value_heads"], c["vocab_size"], c.get("conv_L_cache", 3)
    hd = d // H
    if "layer_types" in c:
        attn = [t == "full_attention" for t in c["layer_types"]]
    else:
        attn = [i in c["full_attn_idxs"] for i in range(L)]
    if len(attn) != L:
        raise SystemExit("write_gguf: layer_types / full_attn_idxs do not match num_hidden_layers")
    ff = lfm2_ffn_dim(c)
    kv = {"lfm2.context_length": (g.UINT32, c.get("max_position_embeddings", 128000)),
          "lfm2.embedding_length": (g.UINT32, d), "lfm2.block_count": (g.UINT32, L),
          "lfm2.feed_forward_length": (g.UINT32, ff), "lfm2.attention.head_count": (g.UINT32, H),
          "lfm2.attention.head_count_kv": _arr_i32([kvh if a else 0 for a in attn]),
          "lfm2.rope.freq_base": (g.FLOAT32, float(c.get("rope_theta", 1000000.0))),
          "lfm2.attention.layer_norm_rms_epsilon": (g.FLOAT32, float(c.get("norm_eps", 1e-5))),
          "lfm2.vocab_size": (g.UINT32, V), "lfm2.shortconv.l_cache": (g.UINT32, K)}
    ts = [("token_embd.weight", [d, V])]
    for i in range(L):
        p = f"blk.{i}."
        ts += [(p + "attn_norm.weight", [d])]
        if attn[i]:
            ts += [(p + "attn_q.weight", [d, d]), (p + "attn_k.weight", [d, kvh * hd]), (p + "attn_v.weight", [d, kvh * hd]),
                   (p + "attn_output.weight", [d, d]), (p + "attn_q_norm.weight", [hd]), (p + "attn_k_norm.weight", [hd])]
        else:
            ts += [(p + "shortconv.conv.weight", [K, d]), (p + "shortconv.in_proj.weight", [d, 3 * d]),
                   (p + "shortconv.out_proj.weight", [d, d])]
        ts += [(p + "ffn_norm.weight", [d]), (p + "ffn_gate.weight", [d, ff]), (p + "ffn_up.weight", [d, ff]),
               (p + "ffn_down.weight", [ff, d])]
    ts.append(("token_embd_norm.weight", [d]))  # LLM_TENSOR_OUTPUT_NORM_LFM2 (the final norm)
    if not c.get("tie_embedding", c.get("tie_word_embeddings", True)):
        ts.append(("output.weight", [d, V]))
    return kv, ts


def plan_qwen35(c):
    """llama.cpp arch `qwen35` (conversion/qwen.py Qwen3_5TextModel <- Qwen3NextModel;
    src/models/qwen35.cpp load_arch_tensors). The text config only (no vision tower, no MTP layer)."""
    c = dict(c.get("text_config", {}), **{k: v for k, v in c.items() if k != "text_config"}) if "text_config" in c else c
    d, L, H = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    kvh, hd, ff, V = c["num_key_value_heads"], c["head_dim"], c["intermediate_size"], c["vocab_size"]
    nk, nv = c["linear_num_key_heads"], c["linear_num_value_heads"]
    dk, dv, K = c["linear_key_head_dim"], c["linear_value_head_dim"], c["linear_conv_kernel_dim"]
    rp = c.get("rope_parameters") or {}
    theta = rp.get("rope_theta", c.get("rope_theta", 10000000.0))
    prf = rp.get("partial_rotary_factor", c.get("partial_rotary_factor", 0.25))
    sections = list(rp.get("mrope_section", [11, 11, 10])) + [0]
    if "layer_types" in c:
        linear = [t == "linear_attention" for t in c["layer_types"]]
    else:
        every = c.get("full_attention_interval", 4)
        linear = [(i + 1) % every != 0 for i in range(L)]
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    kv = {"qwen35.context_length": (g.UINT32, c.get("max_position_embeddings", 262144)),
          "qwen35.embedding_length": (g.UINT32, d), "qwen35.block_count": (g.UINT32, L),
          "qwen35.feed_forward_length": (g.UINT32, ff), "qwen35.attention.head_count": (g.UINT32, H),
          "qwen35.attention.head_count_kv": (g.UINT32, kvh),
          "qwen35.rope.freq_base": (g.FLOAT32, float(theta)),
          "qwen35.attention.layer_norm_rms_epsilon": (g.FLOAT32, float(c.get("rms_norm_eps", 1e-6))),
          "qwen35.attention.key_length": (g.UINT32, hd), "qwen35.attention.value_length": (g.UINT32, hd),
          "qwen35.ssm.conv_kernel": (g.UINT32, K), "qwen35.ssm.state_size": (g.UINT32, dk),
          "qwen35.ssm.group_count": (g.UINT32, nk), "qwen35.ssm.time_step_rank": (g.UINT32, nv),
          "qwen35.ssm.inner_size": (g.UINT32, value_dim),
          "qwen35.attention.recurrent_layers": (g.ARRAY, (g.BOOL, linear)),
          "qwen35.full_attention_interval": (g.UINT32, c.get("full_attention_interval", 4)),
          "qwen35.rope.dimension_count": (g.UINT32, int(hd * prf)),
          "qwen35.rope.dimension_sections": _arr_i32(sections[:4])}
    ts = [("token_embd.weight", [d, V])]
    for i in range(L):
        p = f"blk.{i}."
        ts += [(p + "attn_norm.weight", [d])]
        if linear[i]:
            ts += [(p + "attn_qkv.weight", [d, conv_dim]), (p + "attn_gate.weight", [d, value_dim]),
                   (p + "ssm_conv1d.weight", [K, conv_dim]), (p + "ssm_dt.bias", [nv]), (p + "ssm_a", [nv]),
                   (p + "ssm_beta.weight", [d, nv]), (p + "ssm_alpha.weight", [d, nv]), (p + "ssm_norm.weight", [dv]),
                   (p + "ssm_out.weight", [value_dim, d])]
        else:
            ts += [(p + "attn_q.weight", [d, 2 * H * hd]), (p + "attn_k.weight", [d, kvh * hd]),
                   (p + "attn_v.weight", [d, kvh * hd]), (p + "attn_output.weight", [H * hd, d]),
                   (p + "attn_q_norm.weight", [hd]), (p + "attn_k_norm.weight", [hd])]
        ts += [(p + "post_attention_norm.weight", [d]), (p + "ffn_gate.weight", [d, ff]), (p + "ffn_up.weight", [d, ff]),
               (p + "ffn_down.weight", [ff, d])]
    ts.append(("output_norm.weight", [d]))
    if not c.get("tie_word_embeddings", True):
        ts.append(("output.weight", [d, V]))
    return kv, ts


def vocab_kv(vocab_path, n_vocab):
    """tokenizer.* of a real GGUF, padded with unused tokens (type 5, UNUSED) to n_vocab."""
    v = g.load_header(vocab_path)
    kv = {k: x for k, x in v.kv.items() if k.startswith("tokenizer.")}
    et, toks = kv["tokenizer.ggml.tokens"][1]
    if n_vocab < len(toks):
        raise SystemExit(f"write_gguf: vocab_size {n_vocab} < the {len(toks)} tokens of {vocab_path}")
    pad_n = n_vocab - len(toks)
    kv["tokenizer.ggml.tokens"] = (g.ARRAY, (et, toks + [f"<|synthetic_pad_{i}|>" for i in range(pad_n)]))
    if "tokenizer.ggml.token_type" in kv:
        tt, types = kv["tokenizer.ggml.token_type"][1]
        kv["tokenizer.ggml.token_type"] = (g.ARRAY, (tt, types + [5] * pad_n))
    if "tokenizer.ggml.scores" in kv:
        st, sc = kv["tokenizer.ggml.scores"][1]
        kv["tokenizer.ggml.scores"] = (g.ARRAY, (st, sc + [-1000.0] * pad_n))
    return kv, v.get("general.name", os.path.basename(vocab_path))


def header_from_config(path, vocab, sets, ftype=None):
    cfg = json.load(open(path))
    if ftype:
        cfg["ftype"] = ftype
    hf = dict(cfg["hf_config"])
    target = hf.get("text_config", hf)
    for s in sets:
        k, _, val = s.partition("=")
        target[k] = json.loads(val)
    arch, ftype = cfg["arch"], cfg.get("ftype", "Q4_K_M")
    if ftype not in FTYPES:
        raise SystemExit(f"write_gguf: ftype {ftype} not one of {list(FTYPES)}")
    if arch in ("llama", "qwen2", "gemma3"):
        kv, ts = plan_llama_like(hf, arch)
    elif arch == "lfm2":
        kv, ts = plan_lfm2(hf)
    elif arch == "qwen35":
        kv, ts = plan_qwen35(hf)
    else:
        raise SystemExit(f"write_gguf: unknown architecture {arch}")
    n_vocab = ts[0][1][1]
    h = g.Header()
    h.set("general.architecture", g.STRING, arch)
    h.set("general.type", g.STRING, "model")
    h.set("general.name", g.STRING, cfg["name"])
    h.kv.update(kv)
    h.set("general.file_type", g.UINT32, FTYPES[ftype])
    tkv, vname = vocab_kv(vocab, n_vocab)
    h.kv.update(tkv)
    h.set("general.quantization_version", g.UINT32, 2)
    qs = QuantState(ts)
    n_layer = kv[arch + ".block_count"][1]
    h.tensors = [g.Tensor(n, s, quant_type(n, s, ftype, qs, n_layer)) for n, s in ts]
    h.layout()
    src = f"config {os.path.basename(path)} ({cfg.get('_source', '?')}); vocab from {vname}"
    if sets:
        src += "; overrides " + " ".join(sets)
    return h, src


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--header", help="header extract (gguf_header.py) or a GGUF file")
    ap.add_argument("--config", help="tools/synth/configs/*.json")
    ap.add_argument("--vocab", help="GGUF or extract whose tokenizer.* keys are used (with --config)")
    ap.add_argument("--set", nargs="*", default=[], help="HF config overrides key=JSON (with --config)")
    ap.add_argument("--ftype", choices=list(FTYPES), help="override the config's ftype (with --config)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plan", action="store_true", help="print the tensor table and sizes, write nothing")
    a = ap.parse_args()
    t0 = time.time()
    if bool(a.header) == bool(a.config):
        raise SystemExit("write_gguf: give exactly one of --header or --config")
    if a.header:
        h = g.load_header(a.header)
        src = f"header of {h.get('general.name', '?')} ({os.path.basename(a.header)})"
    else:
        if not a.vocab:
            raise SystemExit("write_gguf: --config needs --vocab (a GGUF or header extract with a tokenizer)")
        h, src = header_from_config(a.config, a.vocab, a.set, a.ftype)
    mark_synthetic(h, a.seed, src)
    counts = {}
    for t in h.tensors:
        n = g.GGML_TYPES[t.type][0]
        counts[n] = counts.get(n, 0) + 1
    data = sum(g.pad(t.nbytes, h.alignment) for t in h.tensors)
    print(f"{a.out}: {h.get('general.architecture')} '{h.get('general.name')}', {len(h.tensors)} tensors {counts}, "
          f"{data / 2**20:.1f} MiB of data")
    if a.plan:
        for t in h.tensors:
            print(f"  {t.name:40s} {g.GGML_TYPES[t.type][0]:6s} {t.shape}")
        return
    size = write_file(h, a.out, a.seed)
    print(f"{a.out}: {size} bytes in {time.time() - t0:.1f} s (seed {a.seed})")


if __name__ == "__main__":
    main()
