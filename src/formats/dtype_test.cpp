// dtype tests: block geometry, and bit-exact dequantization of random blocks against gguf-py
// goldens (tests/fixtures/formats/quant_*.{bin,f32}, made by tools/fixtures/make_format_goldens.py).
#include "formats/dtype.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/test_util.h"

using namespace wgllm;

TEST(Dtype, BlockGeometryMatchesGgml) {
  struct { DType t; size_t elems, bytes; const char* name; } cases[] = {
      {DType::F32, 1, 4, "f32"},      {DType::F16, 1, 2, "f16"},      {DType::BF16, 1, 2, "bf16"},
      {DType::Q4_0, 32, 18, "q4_0"},  {DType::Q4_1, 32, 20, "q4_1"},  {DType::Q8_0, 32, 34, "q8_0"},
      {DType::Q4_K, 256, 144, "q4_K"}, {DType::Q6_K, 256, 210, "q6_K"},
      {DType::Q5_K, 256, 176, "q5_K"}, {DType::Q2_K, 256, 84, "q2_K"}, {DType::Q3_K, 256, 110, "q3_K"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(dtype_block_elems(c.t), c.elems) << c.name;
    EXPECT_EQ(dtype_block_bytes(c.t), c.bytes) << c.name;
    EXPECT_EQ(dtype_name(c.t), c.name);
  }
  EXPECT_EQ(dtype_row_bytes(DType::Q4_1, 576), 18u * 20u);
  EXPECT_THROW(dtype_row_bytes(DType::Q4_1, 100), Error);
  EXPECT_TRUE(dtype_supported(DType::Q6_K));
  EXPECT_FALSE(dtype_supported(DType::Q5_K));
  EXPECT_TRUE(dtype_known(DType::Q5_K));
  EXPECT_FALSE(dtype_known(DType(4)));  // removed Q4_2
  EXPECT_EQ(dtype_name(DType(99)), "type99");
}

TEST(Dtype, UnknownAndUnsupportedTypesGiveClearErrors) {
  try {
    dtype_block_bytes(DType(4));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown ggml tensor type id 4"), std::string::npos);
  }
  uint8_t buf[176] = {};
  float out[256];
  try {
    dequantize(DType::Q5_K, buf, out, 256);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q5_K"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dequantize(DType::Q8_0, buf, out, 31), Error);
}

TEST(Dtype, HandComputedBlocks) {
  // q4_0: d = 1.0 (f16 0x3c00); byte 0x21 -> element 0 = 1-8, element 16 = 2-8.
  uint8_t q40[18] = {0x00, 0x3c, 0x21};
  float y[32];
  dequantize(DType::Q4_0, q40, y, 32);
  EXPECT_EQ(y[0], -7.0f);
  EXPECT_EQ(y[16], -6.0f);
  EXPECT_EQ(y[1], -8.0f);
  // q4_1: d = 0.5, m = -1 (f16 0xbc00); byte 0xf3 -> 3*0.5-1, 15*0.5-1.
  uint8_t q41[20] = {0x00, 0x38, 0x00, 0xbc, 0xf3};
  dequantize(DType::Q4_1, q41, y, 32);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[16], 6.5f);
  // q5_0: d = 0.5 (0x3800); qh bit 0 and bit 17 set; qs[0] = 0x21, qs[1] = 0x43:
  // element 0 = (1 | 16) - 16 = 1, element 16 = 2 - 16 = -14, element 1 = 3 - 16 = -13,
  // element 17 = (4 | 16) - 16 = 4; others (0 - 16).
  uint8_t q50[22] = {0x00, 0x38, 0x01, 0x00, 0x02, 0x00, 0x21, 0x43};
  dequantize(DType::Q5_0, q50, y, 32);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[16], -7.0f);
  EXPECT_EQ(y[1], -6.5f);
  EXPECT_EQ(y[17], 2.0f);
  EXPECT_EQ(y[2], -8.0f);
  EXPECT_EQ(y[31], -8.0f);
  // q8_0: d = 2.0 (0x4000); qs[0] = -3.
  uint8_t q80[34] = {0x00, 0x40, 0xfd};
  dequantize(DType::Q8_0, q80, y, 32);
  EXPECT_EQ(y[0], -6.0f);
  // bf16 0x3f80 = 1.0, f16 0xc000 = -2.0
  uint8_t b16[2] = {0x80, 0x3f}, h16[2] = {0x00, 0xc0};
  dequantize(DType::BF16, b16, y, 1);
  EXPECT_EQ(y[0], 1.0f);
  dequantize(DType::F16, h16, y, 1);
  EXPECT_EQ(y[0], -2.0f);
}

TEST(Dtype, Q4KScaleUnpacking) {
  // d = 1, dmin = 1; sub-block 5 (j >= 4 branch): sc = (scales[9] & 0xF) | (scales[1] >> 6) << 4,
  // m = (scales[9] >> 4) | (scales[5] >> 6) << 4. Elements 160..191 are sub-block 5 (high nibbles
  // of qs[64..95]).
  uint8_t blk[144] = {};
  blk[1] = 0x3c; blk[3] = 0x3c;  // d, dmin = 1.0
  blk[4 + 1] = 0x80;             // top bits of sc5 = 2 -> +32
  blk[4 + 5] = 0x40;             // top bits of m5 = 1 -> +16
  blk[4 + 9] = 0x73;             // sc5 low = 3, m5 low = 7
  blk[16 + 64] = 0x20;           // element 160: q = 2
  float y[256];
  dequantize(DType::Q4_K, blk, y, 256);
  EXPECT_EQ(y[160], 35.0f * 2 - 23.0f);
  EXPECT_EQ(y[161], -23.0f);
}

class DtypeGolden : public ::testing::TestWithParam<std::pair<const char*, DType>> {};

TEST_P(DtypeGolden, BitExactVsGgufPy) {
  const auto [name, type] = GetParam();
  const auto raw = test::read_file(test::fixture(std::string("quant_") + name + ".bin"));
  const auto want_b = test::read_file(test::fixture(std::string("quant_") + name + ".f32"));
  const size_t n = want_b.size() / 4;
  ASSERT_EQ(n, 1024u);
  ASSERT_EQ(raw.size(), dtype_row_bytes(type, n));
  std::vector<float> got(n);
  dequantize(type, raw.data(), got.data(), n);
  int mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t w, g;
    std::memcpy(&w, want_b.data() + 4 * i, 4);
    std::memcpy(&g, &got[i], 4);
    if (w != g && ++mismatches <= 5) {
      float wf;
      std::memcpy(&wf, &w, 4);
      ADD_FAILURE() << name << " element " << i << ": got " << got[i] << " (0x" << std::hex << g
                    << ") want " << wf << " (0x" << w << ")";
    }
  }
  EXPECT_EQ(mismatches, 0) << name;
}

INSTANTIATE_TEST_SUITE_P(
    AllSupported, DtypeGolden,
    ::testing::Values(std::make_pair("f32", DType::F32), std::make_pair("f16", DType::F16),
                      std::make_pair("bf16", DType::BF16), std::make_pair("q8_0", DType::Q8_0),
                      std::make_pair("q4_0", DType::Q4_0), std::make_pair("q4_1", DType::Q4_1),
                      std::make_pair("q4_K", DType::Q4_K), std::make_pair("q6_K", DType::Q6_K)),
    [](const auto& info) { return std::string(info.param.first); });

TEST(TestUtil, Sha256KnownVectors) {
  EXPECT_EQ(test::sha256_hex("abc", 3),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(test::sha256_hex("", 0),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::string s(1000, 'a');
  EXPECT_EQ(test::sha256_hex(s.data(), s.size()),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}
