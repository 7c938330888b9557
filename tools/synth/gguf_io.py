"""GGUF reading and writing primitives for tools/synth (standard library only).

Format: GGUF v3 (github.com/ggml-org/ggml docs/gguf.md), little-endian:
  magic "GGUF", u32 version, u64 n_tensors, u64 n_kv,
  n_kv x {string key, u32 value type, value}       string = u64 length + bytes
  n_tensors x {string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset}
  zero padding to general.alignment (default 32), then the tensor data section; each tensor's data
  starts at its offset (relative to the section), padded to the alignment (ggml gguf_write,
  gguf-py GGUFWriter).
Metadata values are kept as (type, value) pairs so that a header read here is written back with
exactly the same types: scalars as Python numbers / str / bool, arrays as (ARRAY, (elem_type, list)).
"""
import gzip
import struct

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
_SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i", FLOAT32: "<f",
           BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}
_NP_DTYPE = {UINT8: "<u1", INT8: "<i1", UINT16: "<u2", INT16: "<i2", UINT32: "<u4", INT32: "<i4",
             FLOAT32: "<f4", BOOL: "<u1", UINT64: "<u8", INT64: "<i8", FLOAT64: "<f8"}

# ggml type id -> (name, elements per block, bytes per block); ggml.h enum ggml_type and
# ggml-common.h block layouts (the same table as src/formats/dtype.cpp).
GGML_TYPES = {
    0: ("f32", 1, 4), 1: ("f16", 1, 2), 2: ("q4_0", 32, 18), 3: ("q4_1", 32, 20), 6: ("q5_0", 32, 22),
    7: ("q5_1", 32, 24), 8: ("q8_0", 32, 34), 9: ("q8_1", 32, 40), 10: ("q2_K", 256, 84),
    11: ("q3_K", 256, 110), 12: ("q4_K", 256, 144), 13: ("q5_K", 256, 176), 14: ("q6_K", 256, 210),
    15: ("q8_K", 256, 292), 16: ("iq2_xxs", 256, 66), 17: ("iq2_xs", 256, 74), 18: ("iq3_xxs", 256, 98),
    19: ("iq1_s", 256, 50), 20: ("iq4_nl", 32, 18), 21: ("iq3_s", 256, 110), 22: ("iq2_s", 256, 82),
    23: ("iq4_xs", 256, 136), 24: ("i8", 1, 1), 25: ("i16", 1, 2), 26: ("i32", 1, 4), 27: ("i64", 1, 8),
    28: ("f64", 1, 8), 29: ("iq1_m", 256, 56), 30: ("bf16", 1, 2), 34: ("tq1_0", 256, 54),
    35: ("tq2_0", 256, 66), 39: ("mxfp4", 32, 17),
}
TYPE_ID = {v[0]: k for k, v in GGML_TYPES.items()}
F32, F16, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 8, 12, 13, 14, 30


def tensor_nbytes(ggml_type, shape):
    name, be, bb = GGML_TYPES[ggml_type]
    n = 1
    for d in shape:
        n *= d
    if shape and shape[0] % be:
        raise ValueError(f"innermost dimension {shape[0]} is not a multiple of the {name} block size {be}")
    return n // be * bb


def pad(x, a):
    return (x + a - 1) // a * a


class Tensor:
    __slots__ = ("name", "shape", "type", "offset")

    def __init__(self, name, shape, type_, offset=0):
        self.name, self.shape, self.type, self.offset = name, list(shape), type_, offset

    @property
    def nbytes(self):
        return tensor_nbytes(self.type, self.shape)

    def key(self):
        return (self.name, tuple(self.shape), self.type, self.offset)


class Header:
    """Metadata (ordered dict key -> (type, value)), tensor infos, version; alignment from metadata."""

    def __init__(self, kv=None, tensors=None, version=3):
        self.kv = dict(kv or {})
        self.tensors = list(tensors or [])
        self.version = version

    @property
    def alignment(self):
        return int(self.kv["general.alignment"][1]) if "general.alignment" in self.kv else 32

    def get(self, key, default=None):
        return self.kv[key][1] if key in self.kv else default

    def set(self, key, type_, value):
        self.kv[key] = (type_, value)

    def layout(self):
        """Assigns packed offsets (each tensor at the previous one's padded end, in list order)."""
        off = 0
        for t in self.tensors:
            t.offset = off
            off = pad(off + t.nbytes, self.alignment)
        return off


# ---- reading

class _Reader:
    def __init__(self, f):
        self.f = f

    def read(self, n):
        b = self.f.read(n)
        if len(b) != n:
            raise ValueError("unexpected end of GGUF header")
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.read(struct.calcsize(fmt)))[0]

    def string(self):
        return self.read(self.unpack("<Q")).decode("utf-8", "surrogateescape")

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.unpack("<I"), self.unpack("<Q")
            if et == STRING:
                return (et, [self.string() for _ in range(n)])
            if et == ARRAY:
                raise ValueError("arrays of arrays are not supported")
            fmt = _SCALAR[et]
            size = struct.calcsize(fmt)
            raw = self.read(size * n)
            return (et, list(struct.unpack("<" + str(n) + fmt[1:], raw)))
        return self.unpack(_SCALAR[t])


def read_header(f):
    """Parses a GGUF header from a binary file object positioned at 0; returns (Header, data_start)."""
    r = _Reader(f)
    if r.read(4) != b"GGUF":
        raise ValueError("not a GGUF file (bad magic)")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise ValueError(f"unsupported GGUF version {version}")
    n_tensors, n_kv = r.unpack("<Q"), r.unpack("<Q")
    h = Header(version=version)
    for _ in range(n_kv):
        k = r.string()
        t = r.unpack("<I")
        h.kv[k] = (t, r.value(t))
    for _ in range(n_tensors):
        name = r.string()
        nd = r.unpack("<I")
        shape = [r.unpack("<Q") for _ in range(nd)]
        ty = r.unpack("<I")
        if ty not in GGML_TYPES:
            raise ValueError(f"tensor {name}: unknown ggml type {ty}")
        h.tensors.append(Tensor(name, shape, ty, r.unpack("<Q")))
    return h, pad(f.tell(), h.alignment)


def load_header(path):
    """A GGUF file, or a header extracted by gguf_header.py (gzip of the bytes before the data)."""
    with open(path, "rb") as raw:
        gz = raw.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if gz else open(path, "rb")) as f:
        return read_header(f)[0]


# ---- writing

def _w_string(out, s):
    b = s.encode("utf-8", "surrogateescape")
    out += struct.pack("<Q", len(b))
    out += b


def _w_value(out, t, v):
    if t == STRING:
        _w_string(out, v)
    elif t == ARRAY:
        et, items = v
        out += struct.pack("<IQ", et, len(items))
        if et == STRING:
            for s in items:
                _w_string(out, s)
        else:
            out += struct.pack("<" + str(len(items)) + _SCALAR[et][1:], *items)
    else:
        out += struct.pack(_SCALAR[t], v)


def header_bytes(h):
    """The header (magic .. tensor infos) padded to the alignment: the file's bytes before the data."""
    out = bytearray(b"GGUF")
    out += struct.pack("<IQQ", h.version, len(h.tensors), len(h.kv))
    for k, (t, v) in h.kv.items():
        _w_string(out, k)
        out += struct.pack("<I", t)
        _w_value(out, t, v)
    for t in h.tensors:
        _w_string(out, t.name)
        out += struct.pack("<I", len(t.shape))
        for d in t.shape:
            out += struct.pack("<Q", d)
        out += struct.pack("<IQ", t.type, t.offset)
    out += b"\0" * (pad(len(out), h.alignment) - len(out))
    return bytes(out)
