// Block sizes and reference dequantization for ggml tensor types.
// Layouts: llama.cpp ggml/src/ggml-common.h (block_q4_0, block_q4_1, block_q8_0, block_q4_K,
// block_q6_K); semantics: ggml/src/ggml-quants.c dequantize_row_*. All multi-byte fields are
// little-endian; f16 scales are converted exactly (core/half.h) and arithmetic is f32 in the same
// order as ggml (this file is built with -ffp-contract=off so no FMA changes the rounding).
#include "formats/dtype.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace wgllm {
namespace {

struct TypeInfo {
  uint32_t id;
  const char* name;
  uint32_t block_elems;
  uint32_t block_bytes;
};

constexpr uint32_t QK_K = 256;

// Every type id ggml (ggml.h, gguf-py constants.py GGML_QUANT_SIZES) currently defines. Ids missing
// here (4, 5, 31-33, 36-38: removed types, and anything newer) are "unknown".
constexpr TypeInfo kTypes[] = {
    {0, "f32", 1, 4},
    {1, "f16", 1, 2},
    {2, "q4_0", 32, 2 + 16},
    {3, "q4_1", 32, 2 + 2 + 16},
    {6, "q5_0", 32, 2 + 4 + 16},
    {7, "q5_1", 32, 2 + 2 + 4 + 16},
    {8, "q8_0", 32, 2 + 32},
    {9, "q8_1", 32, 4 + 4 + 32},
    {10, "q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4},
    {11, "q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12},
    {12, "q4_K", QK_K, 2 + 2 + 12 + QK_K / 2},
    {13, "q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2},
    {14, "q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2},
    {15, "q8_K", QK_K, 4 + QK_K + QK_K / 8},
    {16, "iq2_xxs", QK_K, 2 + QK_K / 4},
    {17, "iq2_xs", QK_K, 2 + QK_K / 4 + QK_K / 32},
    {18, "iq3_xxs", QK_K, 2 + QK_K / 4 + QK_K / 8},
    {19, "iq1_s", QK_K, 2 + QK_K / 8 + QK_K / 16},
    {20, "iq4_nl", 32, 2 + 16},
    {21, "iq3_s", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4},
    {22, "iq2_s", QK_K, 2 + QK_K / 4 + QK_K / 16},
    {23, "iq4_xs", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64},
    {24, "i8", 1, 1},
    {25, "i16", 1, 2},
    {26, "i32", 1, 4},
    {27, "i64", 1, 8},
    {28, "f64", 1, 8},
    {29, "iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},
    {30, "bf16", 1, 2},
    {34, "tq1_0", QK_K, 2 + 4 * 13},
    {35, "tq2_0", QK_K, 2 + 64},
    {39, "mxfp4", 32, 1 + 16},
};

const TypeInfo* info(DType t) {
  for (const auto& i : kTypes)
    if (i.id == uint32_t(t)) return &i;
  return nullptr;
}

const TypeInfo& known(DType t) {
  const TypeInfo* i = info(t);
  if (!i) throw Error("unknown ggml tensor type id " + std::to_string(uint32_t(t)));
  return *i;
}

inline uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
inline float rdf16(const uint8_t* p) { return f16_to_f32(rd16(p)); }

// ggml-common.h block_q4_0 {f16 d; u8 qs[16]}: low nibbles -> elements 0..15, high -> 16..31;
// y = (q - 8) * d.
void deq_q4_0(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 18, y += 32) {
    const float d = rdf16(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = float((qs[j] & 0x0F) - 8) * d;
      y[j + 16] = float((qs[j] >> 4) - 8) * d;
    }
  }
}

// block_q4_1 {f16 d; f16 m; u8 qs[16]}: y = q * d + m.
void deq_q4_1(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 20, y += 32) {
    const float d = rdf16(b), m = rdf16(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < 16; ++j) {
      y[j] = float(qs[j] & 0x0F) * d + m;
      y[j + 16] = float(qs[j] >> 4) * d + m;
    }
  }
}

// block_q5_0 {f16 d; u8 qh[4]; u8 qs[16]} (ggml-quants.c dequantize_row_q5_0): 5-bit q = low
// nibble of qs[j] | bit j of qh (as bit 4) for element j, high nibble | bit j+16 for element
// j+16; y = (q - 16) * d.
void deq_q5_0(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 22, y += 32) {
    const float d = rdf16(b);
    const uint32_t qh = uint32_t(b[2]) | uint32_t(b[3]) << 8 | uint32_t(b[4]) << 16 | uint32_t(b[5]) << 24;
    const uint8_t* qs = b + 6;
    for (int j = 0; j < 16; ++j) {
      const uint8_t xh0 = uint8_t(((qh >> j) << 4) & 0x10);
      const uint8_t xh1 = uint8_t((qh >> (j + 12)) & 0x10);
      y[j] = float(int32_t((qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + 16] = float(int32_t((qs[j] >> 4) | xh1) - 16) * d;
    }
  }
}

// block_q8_0 {f16 d; i8 qs[32]}: y = q * d.
void deq_q8_0(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 34, y += 32) {
    const float d = rdf16(b);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
  }
}

// ggml-quants.c get_scale_min_k4: 8 pairs of 6-bit (scale, min) packed in 12 bytes.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = uint8_t((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// block_q4_K {f16 d; f16 dmin; u8 scales[12]; u8 qs[128]}: 8 sub-blocks of 32; each 32-byte chunk
// of qs holds sub-block 2k in its low nibbles and 2k+1 in its high nibbles.
// y = (d*sc) * q - (dmin*m).
void deq_q4_K(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 144) {
    const float d = rdf16(b), dmin = rdf16(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    for (int j = 0, is = 0; j < int(QK_K); j += 64, is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, scales, sc, m);
      const float d1 = d * float(sc), m1 = dmin * float(m);
      scale_min_k4(is + 1, scales, sc, m);
      const float d2 = d * float(sc), m2 = dmin * float(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0x0F) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}

// block_q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: two halves of 128 elements; 6-bit
// q = low nibble of ql | 2 bits of qh << 4, minus 32; y = d * sc * q (left to right).
void deq_q6_K(const uint8_t* b, float* y, uint64_t nb) {
  for (uint64_t i = 0; i < nb; ++i, b += 210) {
    const float d = rdf16(b + 208);
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int n = 0; n < int(QK_K); n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = int((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = int((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * float(sc[is + 0]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
    }
  }
}

}  // namespace

bool dtype_supported(DType t) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0:
    case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q4_K: case DType::Q6_K:
      return true;
    default:
      return false;
  }
}

bool dtype_known(DType t) { return info(t) != nullptr; }

std::string dtype_name(DType t) {
  const TypeInfo* i = info(t);
  return i ? std::string(i->name) : "type" + std::to_string(uint32_t(t));
}

size_t dtype_block_elems(DType t) { return known(t).block_elems; }

size_t dtype_block_bytes(DType t) { return known(t).block_bytes; }

size_t dtype_row_bytes(DType t, uint64_t n) {
  const TypeInfo& i = known(t);
  if (n % i.block_elems != 0)
    throw Error("element count " + std::to_string(n) + " is not a multiple of the " +
                i.name + " block size " + std::to_string(i.block_elems));
  const uint64_t blocks = n / i.block_elems;
  if (blocks > UINT64_MAX / i.block_bytes)
    throw Error("byte size of " + std::to_string(n) + " " + i.name + " elements overflows");
  return size_t(blocks * i.block_bytes);
}

void dequantize(DType t, const void* src, float* dst, uint64_t n) {
  if (!dtype_supported(t))
    throw Error("cannot dequantize tensor type " + dtype_name(t) +
                " (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q4_K, q6_K)");
  const size_t be = dtype_block_elems(t);
  if (n % be != 0)
    throw Error("dequantize " + dtype_name(t) + ": element count " + std::to_string(n) +
                " is not a multiple of the block size " + std::to_string(be));
  const auto* s = static_cast<const uint8_t*>(src);
  const uint64_t nb = n / be;
  switch (t) {
    case DType::F32:
      if (n) std::memcpy(dst, s, n * 4);
      break;
    case DType::F16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(rd16(s + 2 * i));
      break;
    case DType::BF16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(rd16(s + 2 * i));
      break;
    case DType::Q4_0: deq_q4_0(s, dst, nb); break;
    case DType::Q4_1: deq_q4_1(s, dst, nb); break;
    case DType::Q5_0: deq_q5_0(s, dst, nb); break;
    case DType::Q8_0: deq_q8_0(s, dst, nb); break;
    case DType::Q4_K: deq_q4_K(s, dst, nb); break;
    case DType::Q6_K: deq_q6_K(s, dst, nb); break;
    default: break;  // unreachable: dtype_supported() checked above
  }
}

}  // namespace wgllm
