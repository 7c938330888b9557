// GPU weight layouts. A weight matrix W (N rows x K columns, GGUF shape {K, N}) is repacked at
// upload from its file blocks into one of a few layouts that WGSL can read as array<u32> (GGUF's
// 18- and 34-byte blocks are not 4-byte aligned). See wgsl/quant.wgsl for the exact layouts.
// The repack keeps the stored bits of every quant and scale (Q4_K keeps its super-block header and
// the GPU forms each sub-block's scale and min with the same f32 products as ggml; Q6_K keeps its
// 6-bit quants and int8 sub-block scales (WFormat::Q6_K) or is widened to int8 quants and f32
// scales formed exactly as ggml does (WFormat::Q8_F32): both give the same values), so the GPU
// dequantizes to the same values as the CPU reference up to the GPU's own fused multiply-add rounding.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "gpu/buffer.h"

namespace wgllm::kernels {

enum class WFormat { F32, Q4_0, Q4_1, Q4_K, Q8_0, Q8_F32, Q6_K };
const char* wformat_define(WFormat f);  // "FMT_Q4_1", ...

/// Which GPU layout a file type maps to: Q6_K to WFormat::Q6_K (6.5625 bits per weight, as stored)
/// when q6k_packed (ModelOptions::q6k_packed, --q6k-packed), else to WFormat::Q8_F32 (10 bits per
/// weight; the same dequantized values and kernel results). Throws wgllm::Error for types without a
/// GPU path.
WFormat gpu_format_for(DType t, bool q6k_packed = false);

/// CPU-side repacked weight: words[0, soff) quants, words[soff, ...) scales.
struct PackedWeight {
  WFormat fmt = WFormat::F32;
  uint32_t K = 0, N = 0;
  uint32_t block = 32;  // elements per block (BE)
  uint32_t soff = 0;    // first scale word
  std::vector<uint32_t> words;
  uint64_t file_bytes = 0;  // bytes of the original tensor (for traffic accounting)
};

/// Repacks N rows of K elements of type t starting at `data` (GGUF row-major blocks) into
/// gpu_format_for(t, q6k_packed). Throws wgllm::Error if K is not a multiple of the type's block size.
PackedWeight pack_weight(DType t, const uint8_t* data, uint32_t K, uint32_t N, bool q6k_packed = false);

/// A weight resident on the GPU.
struct GpuWeight {
  gpu::Buffer buf;
  WFormat fmt = WFormat::F32;
  uint32_t K = 0, N = 0, block = 32, soff = 0;
  uint64_t bytes() const { return buf.size(); }
};

GpuWeight upload_weight(gpu::Context& ctx, const PackedWeight& pw, const std::string& label);

/// Copies the stored bytes of rows [r0, r0 + n) of a weight into dst (n * row bytes).
using RowReader = std::function<void(uint32_t r0, uint32_t n, uint8_t* dst)>;

/// Packs and uploads a weight of N rows of K elements of type t, `chunk_bytes` of file rows at a
/// time (an even number of rows, at least 2): the host holds one chunk of stored bytes and its
/// packed words, never the whole matrix (the browser build streams weights through a 32-bit heap).
/// The buffer holds exactly what upload_weight(pack_weight(all rows)) writes: every layout stores
/// the quants of consecutive blocks, then their scales, both in block order (a Q4_0/Q8_0 scale
/// word holds the scales of two blocks, hence the even row count). Throws what `rows` or the
/// GPU throws.
GpuWeight upload_weight_rows(gpu::Context& ctx, DType t, uint32_t K, uint32_t N, const RowReader& rows,
                             const std::string& label, uint64_t chunk_bytes = uint64_t(8) << 20,
                             bool q6k_packed = false);

}  // namespace wgllm::kernels
