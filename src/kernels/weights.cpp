#include "kernels/weights.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "gpu/context.h"

namespace wgllm::kernels {
namespace {

uint16_t rd16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t rd32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }

// The unsigned 6-bit quants (0..63) of one 210-byte Q6_K super-block in element order: low 4 bits
// from ql[128], high 2 from qh[64] (ggml dequantize_row_q6_K; the value is (q - 32) * d * sc).
void q6k_quants(const uint8_t* blk, uint8_t q[256]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* l8 = blk + 64 * h;
    const uint8_t* h8 = blk + 128 + 32 * h;
    for (int l = 0; l < 32; ++l) {
      q[128 * h + l + 0] = uint8_t((l8[l] & 0xF) | (((h8[l] >> 0) & 3) << 4));
      q[128 * h + l + 32] = uint8_t((l8[l + 32] & 0xF) | (((h8[l] >> 2) & 3) << 4));
      q[128 * h + l + 64] = uint8_t((l8[l] >> 4) | (((h8[l] >> 4) & 3) << 4));
      q[128 * h + l + 96] = uint8_t((l8[l + 32] >> 4) | (((h8[l] >> 6) & 3) << 4));
    }
  }
}

}  // namespace

const char* wformat_define(WFormat f) {
  switch (f) {
    case WFormat::F32: return "FMT_F32";
    case WFormat::Q4_0: return "FMT_Q4_0";
    case WFormat::Q4_1: return "FMT_Q4_1";
    case WFormat::Q4_K: return "FMT_Q4_K";
    case WFormat::Q8_0: return "FMT_Q8_0";
    case WFormat::Q8_F32: return "FMT_Q8_F32";
    case WFormat::Q6_K: return "FMT_Q6_K";
  }
  return "FMT_F32";
}

WFormat gpu_format_for(DType t, bool q6k_packed) {
  switch (t) {
    case DType::F32: case DType::F16: case DType::BF16: return WFormat::F32;
    case DType::Q4_0: return WFormat::Q4_0;
    case DType::Q4_1: return WFormat::Q4_1;
    case DType::Q4_K: return WFormat::Q4_K;
    case DType::Q8_0: return WFormat::Q8_0;
    case DType::Q5_0: return WFormat::Q8_0;  // widened exactly at pack time (pack_weight)
    case DType::Q6_K: return q6k_packed ? WFormat::Q6_K : WFormat::Q8_F32;
    default: throw Error("no GPU weight layout for tensor type " + dtype_name(t));
  }
}

PackedWeight pack_weight(DType t, const uint8_t* data, uint32_t K, uint32_t N, bool q6k_packed) {
  if (t == DType::Q5_0) {
    // Q5_0 (f16 d, 5-bit q, y = (q - 16) * d) as Q8_0 blocks: the same d and the integers q - 16
    // in [-16, 15] as int8, so every dequantized value is bit-identical (ggml dequantize_row_q5_0).
    if (K % 32) throw Error("weight row length " + std::to_string(K) + " is not a multiple of 32 for type q5_0");
    const uint64_t nb = uint64_t(K) * N / 32;
    std::vector<uint8_t> q8(nb * 34);
    for (uint64_t b = 0; b < nb; ++b) {
      const uint8_t* s = data + b * 22;
      uint8_t* o = q8.data() + b * 34;
      o[0] = s[0];
      o[1] = s[1];
      const uint32_t qh = rd32(s + 2);
      for (int j = 0; j < 16; ++j) {
        const uint32_t x0 = (s[6 + j] & 0x0Fu) | (((qh >> j) << 4) & 0x10u);
        const uint32_t x1 = (uint32_t(s[6 + j]) >> 4) | ((qh >> (j + 12)) & 0x10u);
        o[2 + j] = uint8_t(int8_t(int32_t(x0) - 16));
        o[2 + j + 16] = uint8_t(int8_t(int32_t(x1) - 16));
      }
    }
    PackedWeight pw = pack_weight(DType::Q8_0, q8.data(), K, N);
    pw.file_bytes = dtype_row_bytes(t, K) * N;
    return pw;
  }
  PackedWeight pw;
  pw.fmt = gpu_format_for(t, q6k_packed);
  pw.K = K;
  pw.N = N;
  const uint64_t n_el = uint64_t(K) * N;
  pw.file_bytes = dtype_row_bytes(t, K) * N;
  auto need_multiple = [&](uint32_t b) {
    if (K % b) throw Error("weight row length " + std::to_string(K) + " is not a multiple of " + std::to_string(b) + " for type " + dtype_name(t));
  };
  switch (pw.fmt) {
    case WFormat::F32: {
      pw.block = K % 32 == 0 ? 32 : 4;
      need_multiple(pw.block);
      pw.words.resize(n_el);
      if (t == DType::F32) {
        std::memcpy(pw.words.data(), data, n_el * 4);
      } else {
        for (uint64_t i = 0; i < n_el; ++i) {
          uint16_t h = rd16(data + 2 * i);
          pw.words[i] = bits_from_f32(t == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h));
        }
      }
      pw.soff = uint32_t(n_el);
      break;
    }
    case WFormat::Q4_0:
    case WFormat::Q4_1:
    case WFormat::Q8_0: {
      need_multiple(32);
      const uint64_t nb = n_el / 32;
      const bool q8 = pw.fmt == WFormat::Q8_0;
      const size_t bb = q8 ? 34 : (pw.fmt == WFormat::Q4_1 ? 20 : 18);
      const size_t qw = q8 ? 8 : 4;           // quant words per block
      const size_t hdr = pw.fmt == WFormat::Q4_1 ? 4 : 2;
      const size_t sw = pw.fmt == WFormat::Q4_1 ? nb : (nb + 1) / 2;  // scale words
      pw.soff = uint32_t(nb * qw);
      pw.words.assign(nb * qw + sw, 0);
      for (uint64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = data + b * bb;
        std::memcpy(&pw.words[b * qw], blk + hdr, qw * 4);
        if (pw.fmt == WFormat::Q4_1) {
          pw.words[pw.soff + b] = rd32(blk);  // d | m << 16, as stored
        } else {
          pw.words[pw.soff + b / 2] |= uint32_t(rd16(blk)) << (16 * (b & 1));
        }
      }
      break;
    }
    case WFormat::Q4_K: {  // 256-element super-blocks -> 8 sub-blocks of 32; header kept as stored
      need_multiple(256);
      const uint64_t ns = n_el / 256, nb = ns * 8;
      pw.soff = uint32_t(nb * 4);
      pw.words.assign(nb * 4 + ns * 4, 0);
      for (uint64_t s = 0; s < ns; ++s) {
        const uint8_t* blk = data + s * 144;
        const uint8_t* qs = blk + 16;
        // d, dmin (f16) and the 12 bytes of 6-bit sub-block scales and mins, as stored.
        std::memcpy(&pw.words[pw.soff + 4 * s], blk, 16);
        for (int g = 0; g < 4; ++g) {
          for (int half = 0; half < 2; ++half) {
            const uint64_t b = s * 8 + 2 * g + half;
            uint8_t v[32];
            for (int l = 0; l < 32; ++l) v[l] = half ? (qs[g * 32 + l] >> 4) : (qs[g * 32 + l] & 0xF);
            uint8_t packed[16];
            for (int l = 0; l < 16; ++l) packed[l] = uint8_t(v[l] | (v[l + 16] << 4));
            std::memcpy(&pw.words[b * 4], packed, 16);
          }
        }
      }
      break;
    }
    case WFormat::Q8_F32: {  // Q6_K: 256-element super-blocks -> 16 sub-blocks of 16
      need_multiple(256);
      pw.block = 16;
      const uint64_t ns = n_el / 256, nb = ns * 16;
      pw.soff = uint32_t(nb * 4);
      pw.words.assign(nb * 4 + nb, 0);
      for (uint64_t s = 0; s < ns; ++s) {
        const uint8_t* blk = data + s * 210;
        const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
        const float d = f16_to_f32(rd16(blk + 208));
        uint8_t u[256];
        q6k_quants(blk, u);
        int8_t q[256];
        for (int i = 0; i < 256; ++i) q[i] = int8_t(int(u[i]) - 32);
        std::memcpy(&pw.words[s * 16 * 4], q, 256);
        for (int k = 0; k < 16; ++k) pw.words[pw.soff + s * 16 + k] = bits_from_f32(d * float(sc[k]));
      }
      break;
    }
    case WFormat::Q6_K: {  // 256-element super-blocks -> 16 blocks of 16 at 6 bits (quant.wgsl FMT_Q6_K)
      need_multiple(256);
      pw.block = 16;
      const uint64_t ns = n_el / 256, nb = ns * 16;
      pw.soff = uint32_t(nb * 3);
      pw.words.assign(nb * 3 + ns * 5, 0);
      for (uint64_t s = 0; s < ns; ++s) {
        const uint8_t* blk = data + s * 210;
        uint8_t q[256];
        q6k_quants(blk, q);
        for (int k = 0; k < 16; ++k) {
          const uint8_t* e = q + 16 * k;
          uint8_t lo[8], hi[4] = {0, 0, 0, 0};
          for (int j = 0; j < 4; ++j) {
            lo[j] = uint8_t((e[j] & 0xF) | ((e[j + 8] & 0xF) << 4));          // w0: 0..3 low, 8..11 high
            lo[4 + j] = uint8_t((e[j + 4] & 0xF) | ((e[j + 12] & 0xF) << 4));  // w1: 4..7 low, 12..15 high
          }
          for (int g = 0; g < 4; ++g)
            for (int b = 0; b < 4; ++b) hi[b] = uint8_t(hi[b] | ((e[4 * g + b] >> 4) << (2 * g)));
          uint32_t* out = &pw.words[(s * 16 + k) * 3];
          std::memcpy(out, lo, 8);
          std::memcpy(out + 2, hi, 4);
        }
        std::memcpy(&pw.words[pw.soff + s * 5], blk + 192, 16);  // the int8 scales, as stored
        pw.words[pw.soff + s * 5 + 4] = rd16(blk + 208);         // d (f16)
      }
      break;
    }
  }
  return pw;
}

GpuWeight upload_weight(gpu::Context& ctx, const PackedWeight& pw, const std::string& label) {
  GpuWeight g;
  g.fmt = pw.fmt;
  g.K = pw.K;
  g.N = pw.N;
  g.block = pw.block;
  g.soff = pw.soff;
  g.buf = gpu::Buffer(ctx, uint64_t(pw.words.size()) * 4, gpu::BufferKind::Storage, label);
  g.buf.write(ctx, 0, pw.words.data(), uint64_t(pw.words.size()) * 4);
  return g;
}

GpuWeight upload_weight_rows(gpu::Context& ctx, DType t, uint32_t K, uint32_t N, const RowReader& rows,
                             const std::string& label, uint64_t chunk_bytes, bool q6k_packed) {
  const uint64_t row_bytes = dtype_row_bytes(t, K);
  if (N < 2 || row_bytes * N <= chunk_bytes) {  // one chunk: pack it whole
    std::vector<uint8_t> stored(row_bytes * N);
    rows(0, N, stored.data());
    return upload_weight(ctx, pack_weight(t, stored.data(), K, N, q6k_packed), label);
  }
  const uint32_t chunk = std::max<uint32_t>(2, uint32_t(std::min<uint64_t>(N, chunk_bytes / row_bytes)) & ~1u);
  std::vector<uint8_t> stored(row_bytes * chunk);
  // Words per row of the quants (q) and per two rows of the scales (s2), from the first chunk.
  rows(0, chunk, stored.data());
  PackedWeight pw = pack_weight(t, stored.data(), K, chunk, q6k_packed);
  const uint64_t q = pw.soff / chunk, s2 = uint64_t(pw.words.size() - pw.soff) * 2 / chunk;
  const uint64_t soff = q * N, total = soff + (s2 * N + 1) / 2;
  GpuWeight g;
  g.fmt = pw.fmt;
  g.K = K;
  g.N = N;
  g.block = pw.block;
  g.soff = uint32_t(soff);
  g.buf = gpu::Buffer(ctx, total * 4, gpu::BufferKind::Storage, label);
  for (uint32_t r0 = 0; r0 < N; r0 += chunk) {
    const uint32_t n = std::min(chunk, N - r0);
    if (r0) {
      rows(r0, n, stored.data());
      pw = pack_weight(t, stored.data(), K, n, q6k_packed);
    }
    g.buf.write(ctx, uint64_t(r0) * q * 4, pw.words.data(), uint64_t(pw.soff) * 4);
    if (pw.words.size() > pw.soff)
      g.buf.write(ctx, (soff + uint64_t(r0) * s2 / 2) * 4, pw.words.data() + pw.soff,
                  uint64_t(pw.words.size() - pw.soff) * 4);
  }
  return g;
}

}  // namespace wgllm::kernels
