// upload_weight_rows (chunked packing, used by every model load and by the browser's streamed
// load) must fill the GPU buffer with exactly the words of the one-shot pack_weight + upload, for
// every file type, odd row counts and chunks of a few rows (Q4_0/Q8_0 share scale words between
// two blocks; K-quants have 256-element super-blocks).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "formats/dtype.h"
#include "gpu/context.h"
#include "kernels/weights.h"

namespace wgllm::kernels {
namespace {

std::vector<uint8_t> random_rows(DType t, uint32_t K, uint32_t N, uint32_t seed) {
  std::vector<uint8_t> b(dtype_row_bytes(t, K) * N);
  std::mt19937 rng(seed);
  for (auto& x : b) x = uint8_t(rng());
  if (t == DType::F16 || t == DType::BF16 || t == DType::F32)  // finite values: no NaN payloads
    for (size_t i = 1; i < b.size(); i += 2) b[i] &= 0x3b;
  return b;
}

std::vector<uint32_t> read_words(gpu::Context& ctx, const GpuWeight& w) {
  std::vector<uint32_t> v(w.bytes() / 4);
  w.buf.read(ctx, 0, v.data(), w.bytes());
  return v;
}

TEST(Weights, ChunkedUploadEqualsWholeUpload) {
  auto ctx = gpu::Context::create();
  struct Case { DType t; uint32_t K; bool q6k_packed = true; };
  for (const Case c : {Case{DType::F32, 36}, Case{DType::F16, 64}, Case{DType::BF16, 32}, Case{DType::Q4_0, 96},
                       Case{DType::Q4_0, 64}, Case{DType::Q4_1, 96}, Case{DType::Q8_0, 32}, Case{DType::Q5_0, 96},
                       Case{DType::Q4_K, 256}, Case{DType::Q6_K, 512}, Case{DType::Q6_K, 512, false}}) {
    for (uint32_t N : {1u, 2u, 7u, 13u}) {
      const auto rows = random_rows(c.t, c.K, N, N * 31 + uint32_t(c.t));
      const uint64_t rb = dtype_row_bytes(c.t, c.K);
      const std::string what = dtype_name(c.t) + " K=" + std::to_string(c.K) + " N=" + std::to_string(N) +
                               (c.q6k_packed ? "" : " widened");
      const GpuWeight whole = upload_weight(*ctx, pack_weight(c.t, rows.data(), c.K, N, c.q6k_packed), "whole");
      for (uint64_t chunk_rows : {1u, 2u, 3u, 4u}) {
        uint32_t reads = 0;
        const GpuWeight w = upload_weight_rows(*ctx, c.t, c.K, N, [&](uint32_t r0, uint32_t n, uint8_t* dst) {
          ASSERT_LE(r0 + n, N);
          std::memcpy(dst, rows.data() + r0 * rb, n * rb);
          ++reads;
        }, "chunked", chunk_rows * rb, c.q6k_packed);
        EXPECT_EQ(w.fmt, whole.fmt) << what;
        EXPECT_EQ(w.soff, whole.soff) << what;
        EXPECT_EQ(w.block, whole.block) << what;
        EXPECT_EQ(w.bytes(), whole.bytes()) << what << " chunk " << chunk_rows;
        EXPECT_EQ(read_words(*ctx, w), read_words(*ctx, whole)) << what << " chunk " << chunk_rows;
        if (N > 4) {
          EXPECT_GT(reads, 1u) << what << ": not chunked";
        }
      }
    }
  }
}

}  // namespace
}  // namespace wgllm::kernels
