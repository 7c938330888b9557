// Tensor element types. Values are ggml's type ids (ggml.h `enum ggml_type`) so GGUF files map 1:1.
// Block layouts follow ggml-common.h / ggml-quants.c in llama.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace wgllm {

enum class DType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30,
};

/// True for the types this engine can load and dequantize:
/// F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K (others: a clear "unsupported type" error).
bool dtype_supported(DType t);
/// True for every type id ggml defines (supported or not; see dtype.cpp kTypes). Files may contain
/// known-but-unsupported types: they open fine, and dequantize() throws for them.
bool dtype_known(DType t);
/// Name as in ggml ("f32", "q4_1", "q4_K", ...); "type<N>" for unknown ids.
std::string dtype_name(DType t);
/// Elements per block (1 for plain float types, 32 for Q4_0/Q4_1/Q8_0, 256 for K-quants).
/// Throws wgllm::Error for unknown type ids.
size_t dtype_block_elems(DType t);
/// Bytes per block. Works for every known type (so files with unsupported quants can be validated);
/// throws wgllm::Error for unknown type ids.
size_t dtype_block_bytes(DType t);
/// Bytes for n elements (n must be a multiple of the block size; throws otherwise, and on overflow).
size_t dtype_row_bytes(DType t, uint64_t n);

/// Dequantizes n consecutive elements (n a multiple of the block size) from `src` into `dst`.
/// Exactly ggml's dequantize_row_* semantics (f16 scales converted exactly, f32 arithmetic in
/// ggml's operation order: results are bit-identical to ggml and gguf-py). `src` holds
/// dtype_row_bytes(t, n) bytes, `dst` n floats. Throws wgllm::Error naming the type for
/// unsupported types or when n is not a multiple of the block size.
void dequantize(DType t, const void* src, float* dst, uint64_t n);

}  // namespace wgllm
