// Byte-exact comparison with goldens produced by the reference HF `tokenizers` library
// (tools/fixtures/make_tokenizer_goldens.py -> tests/fixtures/tokenizer/{qwen3,smollm2}.json):
// Qwen3 loaded from its tokenizer.json, SmolLM2 loaded from the GGUF vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "formats/gguf.h"
#include "tokenizer/test_util.h"
#include "tokenizer/tokenizer.h"

namespace wgllm {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kCache = WGLLM_CACHE_DIR;
const std::string kFixtures = std::string(WGLLM_SOURCE_DIR) + "/tests/fixtures/tokenizer/";

json load_golden(const std::string& name) {
  std::string s = test::read_file(kFixtures + name + ".json");
  if (s.empty()) throw std::runtime_error("missing golden " + kFixtures + name + ".json");
  return json::parse(s);
}

// The text a golden entry names: a file under the cache, or "<dir>/*.txt" = all of them
// concatenated in file-name order (as the generator does).
std::string golden_text(const std::string& rel) {
  if (rel.ends_with("/*.txt")) {
    fs::path dir = fs::path(kCache) / rel.substr(0, rel.size() - 6);
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".txt") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& f : files) all += test::read_file(f);
    return all;
  }
  return test::read_file(kCache + "/" + rel);
}

const Tokenizer* qwen3() {
  static std::unique_ptr<Tokenizer> t = [] {
    std::string p = kCache + "/tokenizers/qwen3/tokenizer.json";
    return fs::exists(p) ? Tokenizer::from_hf_json(p) : nullptr;
  }();
  return t.get();
}

const Tokenizer* smollm2() {
  static std::unique_ptr<GgufFile> g;
  static std::unique_ptr<Tokenizer> t = [] {
    std::string p = kCache + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!fs::exists(p)) return std::unique_ptr<Tokenizer>();
    g = GgufFile::open(p);
    return Tokenizer::from_gguf(*g);
  }();
  return t.get();
}

const Tokenizer* get(const std::string& name) { return name == "qwen3" ? qwen3() : smollm2(); }

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, RealTextsMatchReferenceIdsAndRoundTrip) {
  const Tokenizer* tok = get(GetParam());
  if (!tok) GTEST_SKIP() << "tokenizer data not in " << kCache << " (run scripts/setup.sh)";
  json g = load_golden(GetParam());
  double seconds = 0;
  size_t bytes = 0;
  for (const json& t : g.at("texts")) {
    const std::string rel = t.at("path");
    SCOPED_TRACE(rel);
    std::string text = golden_text(rel);
    ASSERT_FALSE(text.empty()) << "missing text " << rel;
    ASSERT_EQ(test::sha256_hex(text.data(), text.size()), t.at("text_sha256").get<std::string>())
        << "the text differs from the one the goldens were made from";
    auto t0 = std::chrono::steady_clock::now();
    std::vector<int32_t> ids = tok->encode(text);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    bytes += text.size();
    auto first = t.at("first_ids").get<std::vector<int32_t>>();
    std::vector<int32_t> head(ids.begin(), ids.begin() + std::min(ids.size(), first.size()));
    EXPECT_EQ(head, first);
    EXPECT_EQ(ids.size(), t.at("count").get<size_t>());
    EXPECT_EQ(test::sha256_ids(ids), t.at("ids_sha256").get<std::string>());
    EXPECT_TRUE(tok->decode(ids) == text) << "decode(encode(text)) != text";
  }
  std::printf("[%s] encoded %.1f MB in %.2f s\n", GetParam().c_str(), bytes / 1e6, seconds);
  // "A few seconds at most" for Moby-Dick + all of SOTU on one core; generous for slow CI.
  EXPECT_LT(seconds, 15.0);
}

TEST_P(Golden, TrickyStringsMatchReference) {
  const Tokenizer* tok = get(GetParam());
  if (!tok) GTEST_SKIP() << "tokenizer data not in " << kCache;
  json g = load_golden(GetParam());
  ASSERT_GE(g.at("strings").size(), 40u);
  for (const json& s : g.at("strings")) {
    const std::string text = s.at("text");
    SCOPED_TRACE("text: " + text);
    auto ids = s.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(text, true), ids);
    EXPECT_EQ(tok->encode(text, false), s.at("ids_no_special").get<std::vector<int32_t>>());
    EXPECT_EQ(tok->decode(ids, false), s.at("decoded").get<std::string>());
    EXPECT_EQ(tok->decode(ids, true), s.at("decoded_skip_special").get<std::string>());
  }
}

TEST_P(Golden, StreamDecoderMatchesDecodeOnRealText) {
  const Tokenizer* tok = get(GetParam());
  if (!tok) GTEST_SKIP() << "tokenizer data not in " << kCache;
  std::string text = test::read_file(kCache + "/text/package/moby-dick/data/data.txt");
  text = text.substr(0, 200000);
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  std::vector<int32_t> ids = tok->encode(text);
  StreamDecoder sd(*tok);
  std::string out;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    ASSERT_FALSE(validate_utf8(piece).has_value());
    out += piece;
  }
  out += sd.flush();
  EXPECT_TRUE(out == text);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, Golden, ::testing::Values("qwen3", "smollm2"));

TEST(GoldenMeta, SpecialIdsOfRealTokenizers) {
  if (const Tokenizer* q = qwen3()) {
    EXPECT_EQ(q->vocab_size(), 151669u);
    EXPECT_EQ(q->bos_id(), Tokenizer::kNoToken);
    EXPECT_EQ(q->eos_id(), q->token_id("<|im_end|>"));
    EXPECT_EQ(q->eos_id(), 151645);
    EXPECT_FALSE(q->add_bos());
    EXPECT_TRUE(q->is_eog(151645));
    EXPECT_TRUE(q->is_eog(q->token_id("<|endoftext|>")));
    EXPECT_FALSE(q->is_eog(q->token_id("<|im_start|>")));
    EXPECT_FALSE(q->is_eog(q->token_id("Hello")));
    EXPECT_EQ(q->token_type(q->token_id("<think>")), TokenType::UserDefined);
    EXPECT_EQ(q->token_to_piece(q->token_id("Ġworld")), " world");
    EXPECT_EQ(q->encode_prompt("hi"), q->encode("hi"));
  }
  if (const Tokenizer* s = smollm2()) {
    EXPECT_EQ(s->vocab_size(), 49152u);
    EXPECT_EQ(s->bos_id(), 1);
    EXPECT_EQ(s->eos_id(), 2);
    EXPECT_FALSE(s->add_bos());
    EXPECT_TRUE(s->is_eog(2));
    EXPECT_TRUE(s->is_eog(0));  // <|endoftext|>
    EXPECT_FALSE(s->is_eog(1));
    EXPECT_EQ(s->token_text(1), "<|im_start|>");
    EXPECT_EQ(s->token_id("<|im_end|>"), 2);
  }
}

// SentencePiece-style mode on the real LLaMA-2 vocabulary against the independent JS
// implementation llama-tokenizer-js@1.2.2 (see tools/fixtures/make_tokenizer_goldens.py for how the
// scores are derived from its merges).
TEST(GoldenLlama2, MatchesLlamaTokenizerJs) {
  const std::string vocab_text = test::read_file(kFixtures + "llama2_vocab.txt");
  if (vocab_text.empty()) GTEST_SKIP() << "no llama2 goldens (generated only when node is present)";
  json g = load_golden("llama2");
  TokenizerSpec spec;
  spec.kind = TokenizerKind::SentencePieceBpe;
  for (size_t b = 0, e; b <= vocab_text.size(); b = e + 1) {
    e = vocab_text.find('\n', b);
    if (e == std::string::npos) e = vocab_text.size();
    spec.pieces.push_back(vocab_text.substr(b, e - b));
  }
  ASSERT_EQ(spec.pieces.size(), 32000u);
  spec.scores = g.at("scores").get<std::vector<float>>();
  spec.types.assign(spec.pieces.size(), TokenType::Normal);
  spec.types[0] = TokenType::Unknown;
  spec.types[1] = spec.types[2] = TokenType::Control;
  for (int i = 3; i < 3 + 256; ++i) spec.types[i] = TokenType::Byte;
  spec.unk = 0;
  spec.bos = 1;
  spec.eos = 2;
  spec.add_bos = true;
  spec.add_space_prefix = true;
  auto tok = Tokenizer::from_spec(spec);
  for (const json& t : g.at("texts")) {
    const std::string rel = t.at("path");
    SCOPED_TRACE(rel);
    std::string text = golden_text(rel);
    ASSERT_EQ(test::sha256_hex(text.data(), text.size()), t.at("text_sha256").get<std::string>());
    std::vector<int32_t> ids = tok->encode(text, /*parse_special=*/false);
    auto first = t.at("first_ids").get<std::vector<int32_t>>();
    std::vector<int32_t> head(ids.begin(), ids.begin() + std::min(ids.size(), first.size()));
    EXPECT_EQ(head, first);
    EXPECT_EQ(ids.size(), t.at("count").get<size_t>());
    EXPECT_EQ(test::sha256_ids(ids), t.at("ids_sha256").get<std::string>());
    EXPECT_TRUE(tok->decode(ids) == text);
  }
  for (const json& s : g.at("strings")) {
    const std::string text = s.at("text");
    SCOPED_TRACE("text: " + text);
    auto ids = tok->encode(text, false);
    EXPECT_EQ(ids, s.at("ids_no_special").get<std::vector<int32_t>>());
    EXPECT_EQ(tok->decode(ids), text);
  }
}

}  // namespace
}  // namespace wgllm
