// GGUF reader tests: the real SmolLM2 model vs gguf-py goldens, synthetic files of every metadata
// type, hand-crafted corrupt files, and truncation / byte-flip robustness sweeps.
#include "formats/gguf.h"

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "formats/gguf_test_doc.h"
#include "formats/tensor_store.h"
#include "formats/test_util.h"

using namespace wgllm;
using test::GgufWriter;

namespace {

/// Parses `b` expecting wgllm::Error whose message contains `want` and a byte offset <= size.
void expect_error(const std::vector<uint8_t>& b, const std::string& want, const char* what) {
  try {
    GgufFile::from_memory(b.data(), b.size(), "bad.gguf");
    ADD_FAILURE() << what << ": parsed without error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(want), std::string::npos) << what << ": " << m;
    EXPECT_NE(m.find("bad.gguf"), std::string::npos) << what << ": " << m;
    const size_t p = m.find("byte offset ");
    ASSERT_NE(p, std::string::npos) << what << ": " << m;
    EXPECT_LE(std::stoull(m.substr(p + 12)), b.size()) << what << ": " << m;
  }
}

/// A small valid GGUF v3 file: every scalar metadata type, arrays, and tensors of several types
/// (including q5_K, known but not dequantizable).
std::vector<uint8_t> small_gguf(uint32_t align = 32) {
  GgufWriter w;
  const bool custom = align != 32;
  w.header(3, 5, 15 + custom);
  w.kv_str("general.architecture", "llama").kv_u32("llama.block_count", 2).kv_i32("i32", -5)
      .kv_f32("f32", 0.25f).kv_bool("flag", true).kv_u64("u64", 1ull << 40).kv_i64("i64", -(1ll << 40))
      .kv_f64("f64", 1e-300).kv_u8("u8", 200).kv_i16("i16", -300)
      .kv_str_array("tokenizer.ggml.tokens", {"<s>", "a", "", "\xe2\x96\x81hi"})
      .kv_i32_array("tokenizer.ggml.token_type", {3, 1, 1, 1})
      .kv_f32_array("scores", {0.5f, -1.0f});
  w.str("bools").u32(9).u32(7).u64(3).put(uint8_t(1)).put(uint8_t(0)).put(uint8_t(1));
  w.str("empty").u32(9).u32(8).u64(0);
  if (custom) w.kv_u32("general.alignment", align);
  // tensors: f32 [8] (32 B), f16 [4,2] (16 B), q8_0 [32,2] (68 B), q4_K [256] (144 B), q5_K [256]
  auto al = [&](uint64_t x) { return (x + align - 1) / align * align; };
  uint64_t o0 = 0, o1 = al(o0 + 32), o2 = al(o1 + 16), o3 = al(o2 + 68), o4 = al(o3 + 144);
  w.tensor("f32.weight", {8}, 0, o0).tensor("f16.weight", {4, 2}, 1, o1)
      .tensor("q8.weight", {32, 2}, 8, o2).tensor("q4k.weight", {256}, 12, o3)
      .tensor("q5k.weight", {256}, 13, o4);
  w.pad(align);
  const size_t ds = w.b.size();
  w.bytes(o4 + 176, 0);
  for (int i = 0; i < 8; ++i) {  // f32 data 0..7
    float f = float(i);
    std::memcpy(&w.b[ds + 4 * i], &f, 4);
  }
  for (int i = 0; i < 8; ++i) w.b[ds + o1 + 2 * i + 1] = 0x3c;  // f16 1.0
  w.b[ds + o2 + 1] = 0x40;                                        // q8_0 d = 2
  w.b[ds + o2 + 2] = 0x05;                                        // qs[0] = 5
  return w.b;
}

nlohmann::json goldens() {
  auto b = test::read_file(test::fixture("smollm2_q4_1.json"));
  return nlohmann::json::parse(b.begin(), b.end());
}

std::unique_ptr<GgufFile> open_real() {
  const std::string p = test::model_path();
  if (!std::filesystem::exists(p)) throw std::runtime_error(p + " missing: run scripts/setup.sh");
  return GgufFile::open(p);
}

}  // namespace

TEST(GgufReal, Metadata) {
  auto f = open_real();
  const auto g = goldens();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->get_str("general.architecture"), "llama");
  EXPECT_EQ(f->get_u64("llama.block_count"), 30u);
  EXPECT_EQ(f->get_u64("llama.embedding_length"), 576u);
  EXPECT_EQ(f->get_u64("llama.attention.head_count"), 9u);
  EXPECT_EQ(f->get_u64("llama.attention.head_count_kv"), 3u);
  EXPECT_EQ(f->get_u64("llama.vocab_size"), 49152u);
  EXPECT_EQ(f->get_i64("llama.context_length"), 8192);
  EXPECT_EQ(f->get_f64("llama.rope.freq_base"), 100000.0);
  EXPECT_FLOAT_EQ(float(f->get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
  for (const auto& [k, v] : g["metadata"].items()) {
    if (v.is_string()) EXPECT_EQ(f->get_str(k), v.get<std::string>()) << k;
    else if (v.is_number_float()) EXPECT_EQ(f->get_f64(k), v.get<double>()) << k;
    else EXPECT_EQ(f->get_u64(k), v.get<uint64_t>()) << k;
  }
  const auto& toks = f->get_str_array("tokenizer.ggml.tokens");
  ASSERT_EQ(toks.size(), 49152u);
  for (const auto& [i, s] : g["tokens_sample"].items()) EXPECT_EQ(toks.at(std::stoul(i)), s.get<std::string>());
  const auto& merges = f->get_str_array("tokenizer.ggml.merges");
  ASSERT_EQ(merges.size(), 48900u);
  for (const auto& [i, s] : g["merges_sample"].items()) EXPECT_EQ(merges.at(std::stoul(i)), s.get<std::string>());
  const auto& tt = f->get_int_array("tokenizer.ggml.token_type");
  ASSERT_EQ(tt.size(), 49152u);
  for (const auto& [i, v] : g["token_type_sample"].items()) EXPECT_EQ(tt.at(std::stoul(i)), v.get<int64_t>());

  ASSERT_EQ(f->tensors().size(), 272u);
  std::map<std::string, int> counts;
  for (const auto& t : f->tensors()) counts[dtype_name(t.type)]++;
  EXPECT_EQ(counts["q4_1"], 210);
  EXPECT_EQ(counts["q8_0"], 1);
  EXPECT_EQ(counts["f32"], 61);
  const auto& emb = f->tensor("token_embd.weight");
  EXPECT_EQ(emb.type, DType::Q8_0);
  EXPECT_EQ(emb.shape, (std::vector<uint64_t>{576, 49152}));
  EXPECT_EQ(f->find("nope"), nullptr);
  EXPECT_THROW(f->tensor("nope"), Error);
}

TEST(GgufReal, DequantizedTensorsMatchGgufPy) {
  auto f = open_real();
  const auto g = goldens();
  TensorStore store(*f);
  EXPECT_EQ(store.names().size(), 272u);
  for (const auto& gt : g["tensors"]) {
    const std::string name = gt["name"];
    SCOPED_TRACE(name);
    const TensorRef r = store.get(name);
    const GgufTensor& t = f->tensor(name);
    EXPECT_EQ(t.offset, gt["offset"].get<uint64_t>());
    EXPECT_EQ(t.nbytes, gt["nbytes"].get<uint64_t>());
    EXPECT_EQ(r.shape, gt["shape"].get<std::vector<uint64_t>>());
    std::string ty = gt["type"];
    for (auto& c : ty) c = char(std::tolower(c));
    EXPECT_EQ(dtype_name(r.type), ty);
    const auto v = dequantize_tensor(r);
    ASSERT_EQ(v.size(), r.n_elements());
    auto bits = [&](size_t i) { return test::f32_bits(v[i]); };
    const uint64_t cols = r.shape[0], rows = v.size() / cols, mid = gt["mid_row"];
    const auto first = gt["row0_first64"].get<std::vector<uint32_t>>();
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(bits(i), first[i]) << "row 0 col " << i;
    const auto m = gt["mid_row_cols_32_48"].get<std::vector<uint32_t>>();
    for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(bits(mid * cols + 32 + i), m[i]) << "mid col " << 32 + i;
    const auto last = gt["last_row_last8"].get<std::vector<uint32_t>>();
    for (size_t i = 0; i < last.size(); ++i) EXPECT_EQ(bits(rows * cols - 8 + i), last[i]);
    EXPECT_EQ(test::sha256_hex(v.data(), v.size() * 4), gt["sha256_f32"].get<std::string>());
  }
}

TEST(GgufReal, TruncatedHeaderAlwaysErrors) {
  const auto g = goldens();
  const size_t data_off = g["data_offset"];
  const auto buf = test::read_file(test::model_path(), data_off + 4096);
  std::vector<size_t> cuts;
  for (size_t k = 0; k < 2048; ++k) cuts.push_back(k);
  for (size_t k = 2048; k < 65536; k += 97) cuts.push_back(k);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) cuts.push_back(65536 + rng() % (data_off - 65536));
  for (size_t k = data_off - 16384; k <= data_off + 4096; k += 331) cuts.push_back(k);  // tensor table
  for (size_t k : cuts) {
    std::vector<uint8_t> b(buf.begin(), buf.begin() + std::min(k, buf.size()));
    expect_error(b, "", ("cut at " + std::to_string(k)).c_str());
  }
}

TEST(GgufReal, ByteFlipsNeverCrash) {
  auto buf = test::read_file(test::model_path());
  const auto g = goldens();
  const size_t data_off = g["data_offset"];
  std::mt19937_64 rng(1234);
  int ok = 0, err = 0;
  for (int i = 0; i < 300; ++i) {
    // flip inside the scalar metadata (first 2 KiB) or the tensor table (last 16 KiB of header)
    const size_t pos = (i % 2) ? rng() % 2048 : data_off - 1 - rng() % 16384;
    const uint8_t old = buf[pos];
    buf[pos] = uint8_t(rng());
    try {
      auto f = GgufFile::from_memory(buf.data(), buf.size(), "flip.gguf");
      ++ok;
    } catch (const Error&) {
      ++err;
    }
    buf[pos] = old;
  }
  EXPECT_GT(err, 0);
  EXPECT_EQ(ok + err, 300);
}

TEST(GgufSynthetic, AllMetadataTypesAndTensors) {
  const auto b = small_gguf();
  auto f = GgufFile::from_memory(b.data(), b.size(), "small.gguf");
  EXPECT_EQ(f->get_str("general.architecture"), "llama");
  EXPECT_EQ(f->get_u64("llama.block_count"), 2u);
  EXPECT_EQ(f->get_i64("i32"), -5);
  EXPECT_EQ(f->get_f64("f32"), 0.25);
  EXPECT_TRUE(f->get_bool("flag"));
  EXPECT_EQ(f->get_u64("u64"), 1ull << 40);
  EXPECT_EQ(f->get_i64("i64"), -(1ll << 40));
  EXPECT_EQ(f->get_f64("f64"), 1e-300);
  EXPECT_EQ(f->get_u64("u8"), 200u);
  EXPECT_EQ(f->get_i64("i16"), -300);
  EXPECT_EQ(f->get_str_array("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<s>", "a", "", "\xe2\x96\x81hi"}));
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{3, 1, 1, 1}));
  EXPECT_EQ(f->get_float_array("scores"), (std::vector<double>{0.5, -1.0}));
  EXPECT_EQ(f->get_int_array("bools"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_TRUE(f->get_str_array("empty").empty());
  EXPECT_EQ(f->metadata().at("bools").elem_type, GgufType::BOOL);
  // defaults and type errors name the key
  EXPECT_EQ(f->get_u64_or("missing", 7), 7u);
  EXPECT_EQ(f->get_str_or("missing", "x"), "x");
  EXPECT_EQ(f->get_f64_or("f32", 1.0), 0.25);
  EXPECT_TRUE(f->get_bool_or("missing", true));
  try {
    f->get_u64("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'general.architecture' has type string"), std::string::npos) << e.what();
  }
  EXPECT_THROW(f->get_u64("i32"), Error);  // negative
  EXPECT_THROW(f->get_str("missing"), Error);
  EXPECT_THROW(f->get_str_or("u8", "x"), Error);

  TensorStore s(*f);
  EXPECT_EQ(s.names().size(), 5u);
  auto v = dequantize_tensor(s.get("f32.weight"));
  EXPECT_EQ(v, (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
  v = dequantize_tensor(s.get("f16.weight"));
  EXPECT_EQ(v, std::vector<float>(8, 1.0f));
  v = dequantize_tensor(s.get("q8.weight"));
  EXPECT_EQ(v[0], 10.0f);
  EXPECT_EQ(v.size(), 64u);
  EXPECT_EQ(dequantize_tensor(s.get("q4k.weight")).size(), 256u);
  // q5_K opens (size validated) but cannot be dequantized: error names tensor and type
  const TensorRef q5 = s.get("q5k.weight");
  EXPECT_EQ(q5.nbytes, 176u);
  try {
    dequantize_tensor(q5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q5k.weight'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("q5_K"), std::string::npos);
  }
  EXPECT_FALSE(s.find("nope").has_value());
  EXPECT_THROW(s.get("nope"), Error);
}

TEST(GgufSynthetic, CustomAlignment) {
  const auto b = small_gguf(64);
  auto f = GgufFile::from_memory(b.data(), b.size());
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->tensor("f16.weight").offset, 64u);
  EXPECT_EQ((f->tensor("f32.weight").data - b.data()) % 64, 0);
}

TEST(GgufSynthetic, VersionTwoAccepted) {
  auto b = small_gguf();
  b[4] = 2;
  EXPECT_EQ(GgufFile::from_memory(b.data(), b.size())->version(), 2u);
}

TEST(GgufBad, HandCraftedFiles) {
  auto b = small_gguf();
  auto mod = [&](size_t pos, uint8_t v) { auto c = b; c[pos] = v; return c; };
  expect_error(mod(0, 'X'), "bad magic", "magic");
  expect_error(mod(4, 1), "version 1", "v1");
  expect_error(mod(4, 4), "version 4", "v4");
  { auto c = b; c[4] = 0; c[7] = 3; expect_error(c, "big-endian", "be"); }
  { auto c = b; c[15] = 0x10; expect_error(c, "tensor count", "n_tensors"); }
  { auto c = b; c[23] = 0x10; expect_error(c, "metadata count", "n_kv"); }
  expect_error(mod(24 + 7, 0x7f), "exceeds", "key length");
  expect_error({b.begin(), b.begin() + 3}, "unexpected end", "3 bytes");
  expect_error({}, "unexpected end", "empty");

  auto tiny = [](auto body) { GgufWriter w; body(w); return w.b; };
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).str("k").u32(8).u64(1000).str("x"); }),
               "string length 1000 exceeds", "string past EOF");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).str("arr").u32(9).u32(8).u64(2).str("a").u64(99); }),
               "'arr'[1]: string length 99 exceeds", "array string past EOF");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).str("k").u32(13).u32(0); }),
               "invalid value type id 13", "bad kv type");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).str("arr").u32(9).u32(9).u64(1).u32(4).u64(0); }),
               "arrays of arrays", "nested array");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).str("arr").u32(9).u32(6).u64(1ull << 40); }),
               "'arr': array length", "huge array");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2); }),
               "'a': duplicate metadata key", "dup key");
  // A NUL inside a key: the message goes on past it (what() is a C string), written as \0.
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 2).kv_u32(std::string("a\0b", 3), 1).kv_u32(std::string("a\0b", 3), 2); }),
               "'a\\0b': duplicate metadata key", "NUL in a key");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).kv_u32("general.alignment", 48); }),
               "'general.alignment': alignment 48 is not a power of two", "align 48");
  expect_error(tiny([](GgufWriter& w) { w.header(3, 0, 1).kv_u64("general.alignment", 32); }),
               "must be uint32", "align type");
  auto one_tensor = [](const std::vector<uint64_t>& shape, uint32_t type, uint64_t off, size_t data) {
    GgufWriter w;
    w.header(3, 1, 0).tensor("t", shape, type, off).pad(32).bytes(data, 0);
    return w.b;
  };
  expect_error(one_tensor({8}, 0, 0, 31), "'t': data [0, +32)", "past EOF");
  expect_error(one_tensor({8}, 0, 1ull << 62, 32), "past the end", "offset past EOF");
  expect_error(one_tensor({8}, 0, 16, 64), "not a multiple of the alignment 32", "misaligned");
  expect_error(one_tensor({8}, 4, 0, 64), "unknown ggml type id 4", "unknown type 4");
  expect_error(one_tensor({8}, 1000, 0, 64), "unknown ggml type id 1000", "unknown type 1000");
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64), "n_dims 5 > 4", "n_dims");
  expect_error(one_tensor({1ull << 32, 1ull << 32}, 0, 0, 64), "overflows int64", "shape overflow");
  expect_error(one_tensor({1ull << 40}, 0, 0, 64), "past the end", "huge tensor");
  expect_error(one_tensor({1ull << 62}, 0, 0, 64), "byte size overflows", "huge bytes");
  expect_error(one_tensor({1ull << 63}, 0, 0, 64), "overflows int64", "dim > int64");
  expect_error(one_tensor({33}, 8, 0, 64), "not a multiple of the q8_0 block size 32", "block");
  {
    GgufWriter w;
    w.header(3, 2, 0).tensor("t", {8}, 0, 0).tensor("t", {8}, 0, 32).pad(32).bytes(64, 0);
    expect_error(w.b, "'t': duplicate tensor name", "dup tensor");
  }
  {
    GgufWriter w;
    w.header(3, 3, 0).tensor("a", {64}, 0, 0).tensor("e", {0}, 0, 64).tensor("b", {8}, 0, 128)
        .pad(32).bytes(256, 0);
    expect_error(w.b, "'b': data overlaps tensor 'a'", "overlap");
  }
  {  // a zero-tensor file that ends right after its metadata is fine
    GgufWriter w;
    w.header(3, 0, 1).kv_u32("x", 1);
    EXPECT_NO_THROW(GgufFile::from_memory(w.b.data(), w.b.size()));
  }
}

// Data regions must match each tensor's type and shape: a relabelled type leaves bytes that belong
// to no tensor (smaller) or overlaps the next tensor / runs past the end (larger).
TEST(GgufBad, DataRegionsMatchTypesAndPackedLayout) {
  test::GgufDoc d;
  d.set_str("general.architecture", "x");
  for (const char* n : {"a", "b", "c"}) d.add_tensor(n, DType::F32, {64}, std::vector<uint8_t>(256, 0));
  const auto ok = d.bytes();
  auto f = GgufFile::from_memory(ok.data(), ok.size());
  EXPECT_EQ(f->tensor("c").offset, 512u);
  EXPECT_EQ(test::GgufDoc::parse(ok).bytes(), ok);  // the document writer round-trips
  auto variant = [&](auto edit) {
    test::GgufDoc v = d;
    edit(v);
    return v.bytes();
  };
  expect_error(variant([](test::GgufDoc& v) { v.tensor("a").type = DType::F16; }),
               "'b': data starts at offset 256 but the previous tensor 'a' (f16 {64}, 128 bytes) ends at 128", "a f16");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("b").type = DType::BF16; }), "128 bytes belong to no tensor", "b bf16");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("c").type = DType::F16; }),
               "'c': the file has 128 bytes after the last tensor's data", "last f16");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("a").type = DType::F64; }), "'b': data overlaps tensor 'a'", "a f64");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("c").type = DType::F64; }), "'c': data [512, +512)", "c f64");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("a").shape = {32}; }), "belong to no tensor", "a shape");
  expect_error(variant([](test::GgufDoc& v) { v.tensor("c").offset = 0; }), "overlaps", "c at 0");
  expect_error(variant([](test::GgufDoc& v) {
                 for (auto& t : v.tensors) t.offset += 32;
                 v.data.insert(v.data.begin(), 32, 0);
               }),
               "'a': data starts at offset 32 but the data section starts at offset 0", "leading gap");
  // Padding inside the alignment is not a gap: a 36-byte tensor followed at offset 64.
  test::GgufDoc p;
  p.add_tensor("x", DType::F32, {9}, std::vector<uint8_t>(36, 0)).add_tensor("y", DType::F32, {8}, std::vector<uint8_t>(32, 0));
  const auto pb = p.bytes();
  EXPECT_EQ(GgufFile::from_memory(pb.data(), pb.size())->tensor("y").offset, 64u);
}

TEST(GgufBad, OpenErrors) {
  test::TempDir d;
  test::write_file(d / "empty.gguf", std::string());
  EXPECT_THROW(GgufFile::open(d / "empty.gguf"), Error);
  EXPECT_THROW(GgufFile::open(d / "missing.gguf"), Error);
  EXPECT_THROW(GgufFile::open(d.path.string()), Error);  // directory
  test::write_file(d / "ok.gguf", small_gguf());
  EXPECT_EQ(GgufFile::open(d / "ok.gguf")->tensors().size(), 5u);
}

TEST(GgufRobust, TruncateSyntheticAtEveryOffset) {
  const auto b = small_gguf();
  for (size_t k = 0; k < b.size(); ++k)
    expect_error({b.begin(), b.begin() + k}, "", ("cut at " + std::to_string(k)).c_str());
}

TEST(GgufRobust, RandomByteFlipsNeverCrash) {
  const auto base = small_gguf();
  std::mt19937_64 rng(42);
  int ok = 0, err = 0;
  for (int i = 0; i < 4000; ++i) {
    auto b = base;
    const int flips = 1 + int(rng() % 3);
    for (int j = 0; j < flips; ++j) b[rng() % b.size()] = uint8_t(rng());
    try {
      auto f = GgufFile::from_memory(b.data(), b.size(), "flip.gguf");
      TensorStore s(*f);
      for (const auto& n : s.names()) {
        const TensorRef r = s.get(n);
        if (dtype_supported(r.type)) (void)dequantize_tensor(r);
      }
      ++ok;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).size(), 0u);
      ++err;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(err, 0);
}

namespace {

// A ByteReader over bytes in memory that counts its reads.
struct MemReader final : ByteReader {
  const std::vector<uint8_t>& b;
  mutable uint64_t reads = 0, bytes_read = 0, largest = 0;
  explicit MemReader(const std::vector<uint8_t>& bytes) : b(bytes) {}
  uint64_t size() const override { return b.size(); }
  std::string name() const override { return "mem.gguf"; }
  void read(uint64_t off, void* dst, uint64_t n) const override {
    if (off > b.size() || n > b.size() - off) throw Error("mem.gguf: read past the end");
    std::memcpy(dst, b.data() + off, n);
    ++reads;
    bytes_read += n;
    largest = std::max(largest, n);
  }
};

}  // namespace

// The streamed open reads only the header (growing the prefix when the header is longer than the
// first 4 MiB) and the tensors' bytes on demand, and sees the same file as the mapped open.
TEST(GgufStreamed, LongHeaderAndTensorsOnDemand) {
  GgufWriter w;
  w.header(3, 1, 2);
  const std::string big(5u << 20, 'x');  // longer than the first prefix
  w.kv_str("general.architecture", "llama").kv_str("big", big);
  w.tensor("f32.weight", {8}, 0, 0);
  w.pad(32);
  const size_t ds = w.b.size();
  w.bytes(32, 0);
  for (int i = 0; i < 8; ++i) {
    const float f = float(i) + 0.5f;
    std::memcpy(&w.b[ds + 4 * i], &f, 4);
  }
  MemReader r(w.b);
  auto f = GgufFile::open_streamed(r);
  EXPECT_EQ(f->reader(), &r);
  EXPECT_EQ(f->get_str("big").size(), big.size());
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].data, nullptr);
  EXPECT_EQ(f->tensors()[0].file_offset, ds);
  EXPECT_LT(r.bytes_read, 2 * w.b.size());  // header prefixes only, no tensor data yet
  TensorStore ts(*f);
  const std::vector<float> v = dequantize_tensor(ts.get("f32.weight"));
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v[i], float(i) + 0.5f);
  uint8_t two[8];
  ts.get("f32.weight").read(4, 8, two);
  EXPECT_EQ(0, std::memcmp(two, &w.b[ds + 4], 8));
  EXPECT_THROW(ts.get("f32.weight").read(30, 4, two), Error);
  // A truncated file fails as the mapped reader does (no endless prefix growth).
  for (size_t cut : {size_t(3), size_t(100), size_t(5u << 20), w.b.size() - 1}) {
    std::vector<uint8_t> t(w.b.begin(), w.b.begin() + cut);
    MemReader rt(t);
    EXPECT_THROW(GgufFile::open_streamed(rt), Error) << "cut at " << cut;
  }
}

TEST(GgufStreamed, RealModelSameAsMapped) {
  const auto mapped = open_real();
  const auto bytes = test::read_file(test::model_path());
  MemReader r(bytes);
  const auto f = GgufFile::open_streamed(r);
  EXPECT_EQ(f->metadata().size(), mapped->metadata().size());
  ASSERT_EQ(f->tensors().size(), mapped->tensors().size());
  TensorStore a(*mapped), b(*f);
  for (const std::string& n : a.names()) {
    const TensorRef x = a.get(n), y = b.get(n);
    ASSERT_EQ(x.nbytes, y.nbytes) << n;
    EXPECT_EQ(y.data, nullptr) << n;
    EXPECT_EQ(x.bytes(), y.bytes()) << n;
  }
}
