// Pieces every WebGPU model file shares: weight upload (with fused stacking of row blocks) and
// the end of a forward (final RMSNorm on the last row, lm_head, device argmax or logits readback,
// the one submission of the step).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor_store.h"
#include "gpu/buffer.h"
#include "kernels/ops.h"
#include "kernels/weights.h"
#include "models/model.h"

namespace wgllm {

/// A block of whole rows of one weight matrix as stored in the file (e.g. Q, K and V projections
/// stacked into one fused matrix): `rows` rows of `data` (nbytes bytes).
struct RowBlock {
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint32_t rows = 0;
};

/// Uploads the row blocks of a matrix of type `type` with rows of K elements, stacked in order,
/// as one GPU weight; adds its bytes to mem.weights. Throws wgllm::Error on unsupported types.
kernels::GpuWeight upload_rows(gpu::Context& ctx, DType type, uint32_t K, const std::vector<RowBlock>& blocks,
                               const std::string& label, MemoryReport& mem);
/// Same for whole tensors (shape {K, N} each); all must share type and K ("cannot fuse" otherwise).
kernels::GpuWeight upload_matrix(gpu::Context& ctx, const std::vector<const TensorRef*>& parts, const std::string& label,
                                 MemoryReport& mem);
/// An f32 vector (norm weights, tables) as a storage buffer; adds its bytes to mem.weights.
gpu::Buffer upload_f32(gpu::Context& ctx, const std::vector<float>& v, const std::string& label, MemoryReport& mem);

enum class HeadOut { None, Logits, Argmax };

/// Buffers of the output head.
struct HeadBuffers {
  const gpu::Buffer& out_norm;      // final RMSNorm weight [d_model]
  const kernels::GpuWeight& lm_head;
  const gpu::Buffer& h;             // scratch row [d_model]
  const gpu::Buffer& logits;        // [vocab]
  const gpu::Buffer& amax;          // [1] u32
};

/// Records the output head on row `last_row` (element offset of the last token's hidden state in
/// x), then submits the recording (the only submission of the step). With HeadOut::Argmax reads
/// back 4 bytes and returns the id; with Logits fills *logits; with None submits without a head.
int32_t finish_forward(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, uint32_t last_row,
                       const HeadBuffers& hb, HeadOut out, std::vector<float>* logits);

}  // namespace wgllm
