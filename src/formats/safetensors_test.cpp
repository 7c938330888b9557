// Safetensors reader tests: valid files (shapes in both orders, metadata, dtypes), hand-crafted
// corrupt headers, and truncation / byte-flip sweeps. Files are written by st_test_writer.h.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "formats/st_test_writer.h"
#include "formats/test_util.h"

using namespace wgllm;
using test::StTensor;

namespace {

std::vector<uint8_t> sample() {
  return test::st_file(
      {StTensor{"model.embed_tokens.weight", "F32", {2, 3}, test::bytes_of<float>({0, 1, 2, 3, 4, 5})},
       StTensor{"norm.weight", "F16", {4}, test::bytes_of<uint16_t>({0x3c00, 0x4000, 0xbc00, 0})},
       StTensor{"lm_head.weight", "BF16", {2, 2}, test::bytes_of<uint16_t>({0x3f80, 0x4040, 0, 0xc000})},
       StTensor{"position_ids", "I64", {3}, test::bytes_of<int64_t>({0, 1, 2})},
       StTensor{"mask", "BOOL", {2}, {1, 0}},
       StTensor{"empty", "F32", {0, 4}, {}}},
      {{"format", "pt"}});
}

void expect_error(const std::vector<uint8_t>& b, const std::string& want, const char* what) {
  try {
    SafetensorsFile::from_memory(b.data(), b.size(), "bad.safetensors");
    ADD_FAILURE() << what << ": parsed without error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(want), std::string::npos) << what << ": " << m;
    EXPECT_NE(m.find("bad.safetensors"), std::string::npos) << what << ": " << m;
    const size_t p = m.find("byte offset ");
    ASSERT_NE(p, std::string::npos) << what << ": " << m;
    EXPECT_LE(std::stoull(m.substr(p + 12)), b.size()) << what << ": " << m;
  }
}

std::string entry(const std::string& dtype, const std::string& shape, const std::string& offs) {
  return R"({"t":{"dtype":")" + dtype + R"(","shape":)" + shape + R"(,"data_offsets":)" + offs + "}}";
}

}  // namespace

TEST(Safetensors, ValidFile) {
  const auto b = sample();
  auto f = SafetensorsFile::from_memory(b.data(), b.size(), "ok.safetensors");
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 6u);
  const auto& e = f->tensor("model.embed_tokens.weight");
  EXPECT_EQ(e.hf_shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(e.shape, (std::vector<uint64_t>{3, 2}));  // ggml order: innermost first
  EXPECT_EQ(e.type, DType::F32);
  EXPECT_TRUE(e.supported());
  EXPECT_EQ(e.nbytes, 24u);
  EXPECT_EQ(e.n_elements(), 6u);
  float v[6];
  dequantize(e.type, e.data, v, 6);
  EXPECT_EQ(v[5], 5.0f);
  const auto& n = f->tensor("norm.weight");
  EXPECT_EQ(n.type, DType::F16);
  EXPECT_EQ(n.offset, 24u);
  dequantize(n.type, n.data, v, 4);
  EXPECT_EQ(v[1], 2.0f);
  EXPECT_EQ(v[2], -1.0f);
  const auto& l = f->tensor("lm_head.weight");
  EXPECT_EQ(l.type, DType::BF16);
  dequantize(l.type, l.data, v, 4);
  EXPECT_EQ(v[1], 3.0f);
  EXPECT_EQ(v[3], -2.0f);
  const auto& p = f->tensor("position_ids");
  EXPECT_TRUE(p.has_dtype);
  EXPECT_EQ(p.type, DType::I64);
  EXPECT_FALSE(p.supported());
  EXPECT_FALSE(f->tensor("mask").has_dtype);
  EXPECT_EQ(f->tensor("empty").n_elements(), 0u);
  EXPECT_EQ(f->find("nope"), nullptr);
  try {
    f->tensor("nope");
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("'nope'"), std::string::npos);
  }
  // tensors() is sorted by name
  for (size_t i = 1; i < f->tensors().size(); ++i)
    EXPECT_LT(f->tensors()[i - 1].name, f->tensors()[i].name);
}

TEST(Safetensors, OpenFromDisk) {
  test::TempDir d;
  test::write_file(d / "m.safetensors", sample());
  auto f = SafetensorsFile::open(d / "m.safetensors");
  EXPECT_EQ(f->tensors().size(), 6u);
  EXPECT_THROW(SafetensorsFile::open(d / "missing.safetensors"), Error);
  test::write_file(d / "empty.safetensors", std::string());
  EXPECT_THROW(SafetensorsFile::open(d / "empty.safetensors"), Error);
}

TEST(Safetensors, BadHeaders) {
  const std::vector<uint8_t> d16(16, 0);
  {
    auto f = test::st_raw("{}", {});
    EXPECT_NO_THROW(SafetensorsFile::from_memory(f.data(), f.size()));
  }
  {
    auto b = test::st_raw("{}", {});
    b[0] = 200;
    expect_error(b, "header length 200 exceeds", "len past EOF");
    b[7] = 0xff;
    expect_error(b, "header length", "len huge");
  }
  expect_error({1, 2, 3}, "too short", "short");
  expect_error(test::st_raw("{\"t\": [1,", d16), "invalid JSON", "syntax");
  expect_error(test::st_raw("[1,2]", d16), "not an object", "array header");
  expect_error(test::st_raw(std::string(40, '[') + std::string(40, ']'), {}), "nests deeper", "deep");
  expect_error(test::st_raw("{\"a\":\"\xff\"}", {}), "invalid JSON", "bad utf8");
  expect_error(test::st_raw(entry("Q9", "[4]", "[0,16]"), d16), "'t': unknown dtype \"Q9\"", "dtype");
  expect_error(test::st_raw(entry("F32", "[-4]", "[0,16]"), d16), "non-negative integers", "neg shape");
  expect_error(test::st_raw(entry("F32", "[4.5]", "[0,16]"), d16), "non-negative integers", "float shape");
  expect_error(test::st_raw(entry("F32", "4", "[0,16]"), d16), "\"shape\"", "shape type");
  expect_error(test::st_raw(entry("F32", "[4]", "[0,32]"), d16), "past the end of the 16-byte data buffer", "past EOF");
  expect_error(test::st_raw(entry("F32", "[4]", "[0,12]"), d16), "does not match shape", "size mismatch");
  expect_error(test::st_raw(entry("F32", "[4]", "[8,4]"), d16), "begin 8 > end 4", "reversed");
  expect_error(test::st_raw(entry("F32", "[4]", "[0]"), d16), "data_offsets", "offsets arity");
  expect_error(test::st_raw(entry("F32", "[4294967296,4294967296]", "[0,16]"), d16), "overflows", "overflow");
  expect_error(test::st_raw(entry("F32", "[1152921504606846976]", "[0,16]"), d16), "does not match", "bytes overflow");
  expect_error(test::st_raw(R"({"t":{"shape":[1],"data_offsets":[0,4]}})", d16), "'t': missing or non-string \"dtype\"", "no dtype");
  expect_error(test::st_raw(R"({"t":5})", d16), "'t': entry is not an object", "entry type");
  expect_error(test::st_raw(R"({"__metadata__":{"a":1}})", d16), "metadata values must be strings", "meta");
  expect_error(test::st_raw(R"({"__metadata__":[]})", d16), "__metadata__", "meta type");
  expect_error(test::st_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", d16),
               "'b': data overlaps tensor 'a'", "overlap");
  expect_error(test::st_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
               "'a': duplicate key", "dup");
}

// The buffer must be entirely indexed (spec; reference reader): bytes outside every tensor mean
// an entry's dtype or shape does not match the data it was written with.
TEST(Safetensors, NoHolesInTheDataBuffer) {
  const std::vector<uint8_t> d16(16, 0), d20(20, 0);
  expect_error(test::st_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})", d20),
               "'b': data_offsets begin 12 leaves 4 bytes after tensor 'a' (ends at 8) that belong to no tensor", "hole");
  expect_error(test::st_raw(entry("F32", "[2]", "[0,8]"), d16), "16-byte data buffer has 8 bytes after the last tensor",
               "trailing");
  expect_error(test::st_raw(entry("F32", "[2]", "[8,16]"), d16), "after the start of the data buffer", "leading");
  // F32 relabelled F16 with offsets shrunk to match: a hole where the second half was.
  expect_error(test::st_raw(R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
               "belong to no tensor", "relabelled");
  // Empty tensors may sit anywhere between others; a buffer of only empty tensors is empty.
  {
    auto f = test::st_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                          R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16);
    EXPECT_NO_THROW(SafetensorsFile::from_memory(f.data(), f.size()));
  }
  expect_error(test::st_raw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                            R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})", d16),
               "'e': data_offsets begin 4 lies inside tensor 'a'", "empty inside");
}

TEST(Safetensors, TruncateAtEveryOffset) {
  const auto b = sample();
  for (size_t k = 0; k < b.size(); ++k)
    expect_error({b.begin(), b.begin() + k}, "", ("cut at " + std::to_string(k)).c_str());
}

TEST(Safetensors, RandomByteFlipsNeverCrash) {
  const auto base = sample();
  std::mt19937_64 rng(99);
  int ok = 0, err = 0;
  std::vector<float> out;
  for (int i = 0; i < 3000; ++i) {
    auto b = base;
    const int flips = 1 + int(rng() % 3);
    for (int j = 0; j < flips; ++j) b[rng() % b.size()] = uint8_t(rng());
    try {
      auto f = SafetensorsFile::from_memory(b.data(), b.size(), "flip.safetensors");
      for (const auto& t : f->tensors())
        if (t.supported()) {
          out.resize(t.n_elements());
          dequantize(t.type, t.data, out.data(), t.n_elements());
        }
      ++ok;
    } catch (const Error&) {
      ++err;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(err, 0);
}
