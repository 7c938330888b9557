// Unit tests on synthetic vocabularies: BPE merge order against a naive reference, the
// SentencePiece-style mode, special tokens, UTF-8 validation, StreamDecoder, loader errors.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/test_util.h"  // GgufWriter (test-only, owned by src/formats)
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm {
namespace {

const char* const kSp = "\xE2\x96\x81";  // U+2581

std::string sp(std::string s) {  // ' ' -> U+2581
  std::string r;
  for (char c : s) r += c == ' ' ? std::string(kSp) : std::string(1, c);
  return r;
}

// ---------------------------------------------------------------- UTF-8

TEST(Utf8, ValidateAcceptsWellFormed) {
  EXPECT_FALSE(validate_utf8("").has_value());
  EXPECT_FALSE(validate_utf8("plain ascii\n").has_value());
  EXPECT_FALSE(validate_utf8("h\xC3\xA9llo \xE6\x97\xA5 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF").has_value());
  EXPECT_FALSE(validate_utf8(std::string("nul\0inside", 10)).has_value());
}

TEST(Utf8, ValidateReportsFirstBadOffset) {
  EXPECT_EQ(validate_utf8("ab\xFF"), 2u);              // never valid
  EXPECT_EQ(validate_utf8("\x80"), 0u);                // stray continuation
  EXPECT_EQ(validate_utf8("a\xC0\x80"), 1u);           // overlong NUL
  EXPECT_EQ(validate_utf8("a\xE0\x80\x80"), 1u);       // overlong 3-byte
  EXPECT_EQ(validate_utf8("ab\xED\xA0\x80"), 2u);      // UTF-16 surrogate
  EXPECT_EQ(validate_utf8("\xF4\x90\x80\x80"), 0u);    // > U+10FFFF
  EXPECT_EQ(validate_utf8("\xF5\x80\x80\x80"), 0u);
  EXPECT_EQ(validate_utf8("ok \xE6\x97"), 3u);         // truncated at the end
  EXPECT_EQ(validate_utf8("\xC3\xA9\xC3("), 2u);       // lead byte without continuation
}

// ---------------------------------------------------------------- byte-level BPE

// 256 byte tokens (ids 0..255 in byte order) plus merges over a small alphabet, generated
// randomly; no pre-tokenizer so a whole string is one word.
struct RandomBpe {
  TokenizerSpec spec;
  std::map<std::pair<std::string, std::string>, int> rank;  // first rank of each pair
  explicit RandomBpe(uint32_t seed, const std::string& alphabet, int n_merges) {
    for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
    std::vector<std::string> toks;
    for (char c : alphabet) toks.emplace_back(1, c);
    std::mt19937 rng(seed);
    for (int i = 0; i < n_merges; ++i) {
      const std::string a = toks[rng() % toks.size()], b = toks[rng() % toks.size()];
      if (a.size() + b.size() > 6) continue;
      if (std::find(toks.begin(), toks.end(), a + b) == toks.end()) {
        toks.push_back(a + b);
        spec.pieces.push_back(a + b);
      }
      rank.emplace(std::make_pair(a, b), int(spec.merges.size()));
      spec.merges.emplace_back(a, b);
    }
  }
  // Naive reference: repeatedly merge the lowest-rank adjacent pair, leftmost on ties.
  std::vector<std::string> reference(const std::string& word) const {
    std::vector<std::string> s;
    for (char c : word) s.emplace_back(1, c);
    for (;;) {
      int best = -1, best_rank = INT_MAX;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        auto it = rank.find({s[i], s[i + 1]});
        if (it != rank.end() && it->second < best_rank) best = int(i), best_rank = it->second;
      }
      if (best < 0) return s;
      s[best] += s[best + 1];
      s.erase(s.begin() + best + 1);
    }
  }
};

TEST(ByteLevelBpe, MergeOrderMatchesNaiveReference) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    RandomBpe r(seed, "abc", 60);
    auto tok = Tokenizer::from_spec(r.spec);
    std::mt19937 rng(seed * 7919);
    for (int k = 0; k < 50; ++k) {
      std::string w;
      size_t len = 1 + rng() % 40;
      for (size_t i = 0; i < len; ++i) w += "abc"[rng() % 3];
      std::vector<int32_t> want;
      for (const auto& piece : r.reference(w)) want.push_back(tok->token_id(piece));
      ASSERT_EQ(tok->encode(w), want) << "seed " << seed << " word " << w;
      ASSERT_EQ(tok->decode(want), w);
    }
  }
}

TEST(ByteLevelBpe, LongRepetitiveWordIsNotQuadratic) {
  RandomBpe r(3, "ab", 40);
  auto tok = Tokenizer::from_spec(r.spec);
  std::string w(200000, 'a');
  for (size_t i = 0; i < w.size(); i += 7) w[i] = 'b';
  auto t0 = std::chrono::steady_clock::now();
  auto ids = tok->encode(w);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tok->decode(ids), w);
  EXPECT_LT(s, 2.0);
}

TEST(ByteLevelBpe, AnyValidUtf8RoundTripsThroughBytes) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
  spec.pretokenizer_regexes = {tok::kGpt2Regex};
  auto tok = Tokenizer::from_spec(spec);
  std::string s = "caf\xC3\xA9 \xF0\x9F\x98\x80\t\n\r x\x01\x7F";
  auto ids = tok->encode(s);
  ASSERT_EQ(ids.size(), s.size());  // no merges: one token per byte
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(ids[i], int32_t(static_cast<unsigned char>(s[i])));
  EXPECT_EQ(tok->decode(ids), s);
  EXPECT_EQ(tok->token_to_piece(0xC3), "\xC3");
  EXPECT_EQ(tok->token_text(' '), "\xC4\xA0");  // 'Ġ'
}

// Found by fuzz_tokenizer_json (fuzz/crashes/tokenizer_json): token ids that are not small
// non-negative integers (1e300: undefined float->size_t cast; -1: wrapped to SIZE_MAX, then an
// out-of-bounds write; 1e15: a petabyte resize) must be a wgllm::Error naming the file.
TEST(HfTokenizerJson, BadTokenIdsAreClearErrors) {
  const std::string src = std::string(WGLLM_SOURCE_DIR) + "/tests/fixtures/qwen35_tiny/tokenizer.json";
  nlohmann::json base = nlohmann::json::parse(std::ifstream(src));
  const auto dir = std::filesystem::path(testing::TempDir()) / "wgllm_bad_ids";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "tokenizer.json").string();
  for (nlohmann::json bad : {nlohmann::json(-1), nlohmann::json(1e300), nlohmann::json(1000000000000000ll),
                             nlohmann::json(2.0), nlohmann::json("7")}) {
    for (bool in_added : {false, true}) {
      nlohmann::json j = base;
      if (in_added) j["added_tokens"][0]["id"] = bad;
      else j["model"]["vocab"].begin().value() = bad;
      std::ofstream(path) << j.dump();
      try {
        Tokenizer::from_hf_json(path);
        ADD_FAILURE() << bad.dump() << " in " << (in_added ? "added_tokens" : "vocab") << ": no error";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("is not an integer in [0, 16777216)"), std::string::npos) << e.what();
      }
    }
  }
  std::ofstream(path) << base.dump();
  EXPECT_NO_THROW(Tokenizer::from_hf_json(path));
}

// Found by fuzz_gguf_tokenizer (fuzz/crashes/gguf_tokenizer): a BYTE token "<0xZZ>" escaped as
// std::invalid_argument from std::stoi; it must be a wgllm::Error naming the token.
TEST(SentencePieceBpe, MalformedByteTokenIsAClearError) {
  for (const char* bad : {"<0xZZ>", "<0x-1>", "<0x 1>", "<0x+F>"}) {
    TokenizerSpec spec;
    spec.kind = TokenizerKind::SentencePieceBpe;
    spec.pieces = {"<unk>", bad};
    spec.types = {TokenType::Unknown, TokenType::Byte};
    spec.scores = {0.f, 0.f};
    try {
      Tokenizer::from_spec(spec);
      ADD_FAILURE() << bad << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("byte token 1"), std::string::npos) << e.what();
    }
  }
  TokenizerSpec ok;
  ok.kind = TokenizerKind::SentencePieceBpe;
  ok.pieces = {"<unk>", "<0x0a>", "<0xFF>"};
  ok.types = {TokenType::Unknown, TokenType::Byte, TokenType::Byte};
  ok.scores = {0.f, 0.f, 0.f};
  auto tok = Tokenizer::from_spec(ok);
  EXPECT_EQ(tok->token_to_piece(1), "\n");
  EXPECT_EQ(tok->token_to_piece(2), "\xFF");
}

TEST(ByteLevelBpe, InvalidUtf8ThrowsWithOffset) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
  auto tok = Tokenizer::from_spec(spec);
  try {
    tok->encode("abc\xC3(");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("byte offset 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0xC3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok->decode(std::vector<int32_t>{256}), Error);
  EXPECT_THROW(tok->decode(std::vector<int32_t>{-1}), Error);
  EXPECT_THROW(tok->token_to_piece(1000), Error);
}

TEST(ByteLevelBpe, AddedTokensLeftmostLongestAndParseSpecial) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
  spec.types.assign(256, TokenType::Normal);
  auto add = [&](const std::string& s, TokenType t) {
    spec.pieces.push_back(s);
    spec.types.push_back(t);
    return int32_t(spec.pieces.size() - 1);
  };
  int32_t ab = add("<ab>", TokenType::Control);
  int32_t abc = add("<ab>c", TokenType::Control);
  int32_t think = add("<think>", TokenType::UserDefined);
  int32_t end = add("<|im_end|>", TokenType::Control);
  spec.eos = end;
  auto tok = Tokenizer::from_spec(spec);
  EXPECT_EQ(tok->encode("x<ab>cy"), (std::vector<int32_t>{'x', abc, 'y'}));
  EXPECT_EQ(tok->encode("<ab><ab>"), (std::vector<int32_t>{ab, ab}));
  EXPECT_EQ(tok->encode("<<think>>"), (std::vector<int32_t>{'<', think, '>'}));
  // parse_special=false: Control tokens become text, UserDefined stay matched.
  EXPECT_EQ(tok->encode("<ab><think>", false),
            (std::vector<int32_t>{'<', 'a', 'b', '>', think}));
  auto ids = tok->encode("a<|im_end|>b<think>");
  EXPECT_EQ(tok->decode(ids), "a<|im_end|>b<think>");
  EXPECT_EQ(tok->decode(ids, true), "ab<think>");
  EXPECT_TRUE(tok->is_eog(end));
  EXPECT_FALSE(tok->is_eog(think));
}

// ---------------------------------------------------------------- SentencePiece-style BPE

struct SpmVocab {
  TokenizerSpec spec;
  SpmVocab(bool byte_tokens, bool add_space_prefix) {
    spec.kind = TokenizerKind::SentencePieceBpe;
    auto add = [&](const std::string& p, float score, TokenType t = TokenType::Normal) {
      spec.pieces.push_back(p);
      spec.scores.push_back(score);
      spec.types.push_back(t);
    };
    add("<unk>", 0, TokenType::Unknown);
    add("<s>", 0, TokenType::Control);
    add("</s>", 0, TokenType::Control);
    if (byte_tokens) {
      for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        add(name, 0, TokenType::Byte);
      }
    }
    // Scores chosen so that greedy-by-score differs from longest-match and from left-to-right.
    const std::pair<const char*, float> normal[] = {
        {kSp, -1}, {"a", -2}, {"b", -2}, {"c", -2}, {"d", -3},
        {"ab", -5}, {"bc", -1.5f}, {"abc", -4}, {"\xE2\x96\x81" "a", -2.5f},
        {"\xE2\x96\x81" "ab", -6}, {"\xE2\x96\x81" "abc", -7}, {"ca", -3}, {"cab", -3.5f},
        {"\xE2\x96\x81\xE2\x96\x81", -8}, {"dd", -9}};
    for (auto [p, s] : normal) add(p, s);
    spec.unk = 0;
    spec.bos = 1;
    spec.eos = 2;
    spec.add_bos = true;
    spec.add_space_prefix = add_space_prefix;
  }
};

// Naive reference of the score-greedy merge (llama.cpp llm_tokenizer_spm_session semantics).
std::vector<int32_t> spm_reference(const Tokenizer& t, const std::string& text, bool prefix) {
  std::string s = sp((prefix ? " " : "") + text);
  std::vector<std::string> syms;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    syms.push_back(s.substr(i, n));
    i += n;
  }
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      int32_t id = t.token_id(syms[i] + syms[i + 1]);
      if (id < 0) continue;
      float sc = t.impl().scores[id];
      if (best < 0 || sc > best_score) best = int(i), best_score = sc;
    }
    if (best < 0) break;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
  std::vector<int32_t> ids;
  for (const auto& x : syms) {
    int32_t id = t.token_id(x);
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    std::vector<int32_t> bytes;
    for (unsigned char c : x) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", c);
      if (int32_t b = t.token_id(name); b >= 0) bytes.push_back(b);
    }
    if (bytes.size() == x.size()) {
      ids.insert(ids.end(), bytes.begin(), bytes.end());
    } else {
      ids.push_back(0);  // <unk>
    }
  }
  return ids;
}

TEST(SentencePiece, HandCheckedExamples) {
  SpmVocab v(true, true);
  auto tok = Tokenizer::from_spec(v.spec);
  auto id = [&](const std::string& p) { return tok->token_id(sp(p)); };
  // "▁abc": bc (-1.5) merges first, then ▁a (-2.5), then ▁a+bc = ▁abc (-7) is a token.
  EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{id(" abc")}));
  // "▁ab d": ▁a (-2.5), then ▁ab (-6); "d" stays; "▁▁" (-8) only when no better pair.
  EXPECT_EQ(tok->encode("ab d"), (std::vector<int32_t>{id(" ab"), id(" "), id("d")}));
  // " cab": ca (-3) then cab (-3.5)... but ab (-5) loses to ca; ▁ stays alone.
  EXPECT_EQ(tok->encode("cab"), (std::vector<int32_t>{id(" "), id("cab")}));
  // Unknown character: byte fallback <0xC3><0xA9>.
  EXPECT_EQ(tok->encode("\xC3\xA9"),
            (std::vector<int32_t>{id(" "), tok->token_id("<0xC3>"), tok->token_id("<0xA9>")}));
  EXPECT_EQ(tok->decode(tok->encode("\xC3\xA9")), "\xC3\xA9");
  EXPECT_EQ(tok->token_to_piece(tok->token_id("<0x41>")), "A");
  EXPECT_EQ(tok->encode_prompt("a"), (std::vector<int32_t>{1, id(" a")}));
}

TEST(SentencePiece, RandomStringsMatchNaiveReferenceAndRoundTrip) {
  for (bool bytes : {true, false}) {
    for (bool prefix : {true, false}) {
      SpmVocab v(bytes, prefix);
      auto tok = Tokenizer::from_spec(v.spec);
      std::mt19937 rng(bytes * 2 + prefix + 1);
      const std::vector<std::string> alphabet = {"a", "b", "c", "d", " ", "\xC3\xA9", "x"};
      for (int k = 0; k < 300; ++k) {
        std::string s;
        size_t len = 1 + rng() % 30;
        for (size_t i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
        ASSERT_EQ(tok->encode(s), spm_reference(*tok, s, prefix)) << "'" << s << "'";
        if (bytes) {
          ASSERT_EQ(tok->decode(tok->encode(s)), s) << "'" << s << "'";
        }
      }
    }
  }
}

TEST(SentencePiece, UnknownWithoutByteTokens) {
  SpmVocab v(false, true);
  auto tok = Tokenizer::from_spec(v.spec);
  auto ids = tok->encode("a\xE6\x97\xA5");
  EXPECT_EQ(ids, (std::vector<int32_t>{tok->token_id(sp(" a")), 0}));
}

TEST(SentencePiece, SpecialTokensAndDummyPrefix) {
  SpmVocab v(true, true);
  auto tok = Tokenizer::from_spec(v.spec);
  auto id = [&](const std::string& p) { return tok->token_id(sp(p)); };
  // The dummy prefix is added at the start and after every special token (llama.cpp
  // is_prev_special), and decode() removes it again.
  EXPECT_EQ(tok->encode("<s>a</s>abc"),
            (std::vector<int32_t>{1, id(" a"), 2, id(" abc")}));
  EXPECT_EQ(tok->decode(tok->encode("<s>a</s>abc")), "<s>a</s>abc");
  EXPECT_EQ(tok->decode(tok->encode("<s>a</s>abc"), true), "aabc");
  EXPECT_EQ(tok->decode(tok->encode(" a b")), " a b");
  // parse_special=false: "<s>" is text; '<', 's', '>' fall back to bytes.
  auto ids = tok->encode("<s>", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{id(" "), tok->token_id("<0x3C>"), tok->token_id("<0x73>"),
                                       tok->token_id("<0x3E>")}));
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_TRUE(tok->add_bos());
}

// ---------------------------------------------------------------- StreamDecoder

TEST(StreamDecoder, HoldsBackPartialCharacters) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
  auto tok = Tokenizer::from_spec(spec);
  StreamDecoder sd(*tok);
  EXPECT_EQ(sd.push('a'), "a");
  EXPECT_EQ(sd.push(0xC3), "");
  EXPECT_EQ(sd.push(0xA9), "\xC3\xA9");
  const std::string emoji = "\xF0\x9F\x98\x80";
  EXPECT_EQ(sd.push(0xF0), "");
  EXPECT_EQ(sd.push(0x9F), "");
  EXPECT_EQ(sd.push(0x98), "");
  EXPECT_EQ(sd.push(0x80), emoji);
  EXPECT_EQ(sd.flush(), "");
  // Bytes that can never be valid become U+FFFD right away; an unfinished tail at flush too.
  EXPECT_EQ(sd.push(0xFF), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.push(0xE6), "");
  EXPECT_EQ(sd.push('x'), "\xEF\xBF\xBDx");
  EXPECT_EQ(sd.push(0xE6), "");
  EXPECT_EQ(sd.push(0x97), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.push(0xED), "");
  EXPECT_EQ(sd.push(0xA0), "\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: ED is not a prefix of it
  EXPECT_THROW(sd.push(9999), Error);
}

TEST(StreamDecoder, MultiByteTokensSplitAcrossTokens) {
  // Tokens that each carry part of a character plus whole characters.
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.pieces.push_back(tok::byte_to_unicode(uint8_t(b)));
  spec.pieces.push_back(tok::byte_to_unicode('x') + tok::byte_to_unicode(0xE6));  // "x\xE6"
  spec.pieces.push_back(tok::byte_to_unicode(0x97) + tok::byte_to_unicode(0xA5) +
                        tok::byte_to_unicode('y'));  // "\x97\xA5y"
  auto tok = Tokenizer::from_spec(spec);
  StreamDecoder sd(*tok);
  EXPECT_EQ(sd.push(256), "x");
  EXPECT_EQ(sd.push(257), "\xE6\x97\xA5y");
  sd.reset();
  EXPECT_EQ(sd.push(256), "x");
  sd.reset();
  EXPECT_EQ(sd.flush(), "");
}

TEST(StreamDecoder, SentencePieceDropsDummyPrefixOnce) {
  SpmVocab v(true, true);
  auto tok = Tokenizer::from_spec(v.spec);
  StreamDecoder sd(*tok, /*skip_special=*/true);
  std::string out;
  for (int32_t id : tok->encode_prompt("abc abc")) out += sd.push(id);
  out += sd.flush();
  EXPECT_EQ(out, "abc abc");
}

// ---------------------------------------------------------------- loaders

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("wgllm_tok_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string write(const std::string& name, const std::string& content) {
    std::ofstream(path_ / name, std::ios::binary) << content;
    return (path_ / name).string();
  }

 private:
  std::filesystem::path path_;
};

nlohmann::json tiny_hf_json() {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[tok::byte_to_unicode(uint8_t(b))] = b;
  vocab["he"] = 256;
  vocab["hel"] = 257;
  vocab["\xC4\xA0h"] = 258;  // "Ġh"
  return {
      {"version", "1.0"},
      {"added_tokens",
       {{{"id", 259}, {"content", "<|im_end|>"}, {"special", true}, {"normalized", false}},
        {{"id", 260}, {"content", "<s>"}, {"special", true}, {"normalized", false}}}},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", R"(\p{N})"}}}, {"behavior", "Isolated"}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"h e", {"he", "l"}, {"\xC4\xA0", "h"}}}}}};
}

TEST(Loaders, HfJsonTinyTokenizerWithConfig) {
  TempDir d;
  std::string p = d.write("tokenizer.json", tiny_hf_json().dump());
  d.write("tokenizer_config.json",
          R"({"bos_token": {"content": "<s>"}, "eos_token": "<|im_end|>", "add_bos_token": true})");
  auto tok = Tokenizer::from_hf_json(p);
  EXPECT_EQ(tok->vocab_size(), 261u);
  EXPECT_EQ(tok->bos_id(), 260);
  EXPECT_EQ(tok->eos_id(), 259);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->encode("help h12<|im_end|>"),
            (std::vector<int32_t>{257, 'p', 258, '1', '2', 259}));
  EXPECT_EQ(tok->encode_prompt("he"), (std::vector<int32_t>{260, 256}));
  // NFC: e + combining acute == precomposed é.
  EXPECT_EQ(tok->encode("e\xCC\x81"), tok->encode("\xC3\xA9"));
}

TEST(Loaders, HfJsonErrorsNameTheProblem) {
  TempDir d;
  EXPECT_THROW(Tokenizer::from_hf_json("/nonexistent/tokenizer.json"), Error);
  auto expect_error = [&](const nlohmann::json& j, const std::string& needle) {
    std::string p = d.write("tokenizer.json", j.dump());
    try {
      Tokenizer::from_hf_json(p);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  };
  auto j = tiny_hf_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  expect_error(j, "Lowercase");
  j = tiny_hf_json();
  j["model"]["type"] = "WordPiece";
  expect_error(j, "WordPiece");
  j = tiny_hf_json();
  j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                        {"behavior", "Isolated"}};
  expect_error(j, "(unclosed");
  d.write("tokenizer.json", "{not json");
  EXPECT_THROW(Tokenizer::from_hf_json(d.write("tokenizer.json", "{not json")), Error);
}

TEST(Loaders, SpecValidation) {
  TokenizerSpec s;
  EXPECT_THROW(Tokenizer::from_spec(s), Error);
  s.pieces = {"a", "b"};
  s.types = {TokenType::Normal};
  EXPECT_THROW(Tokenizer::from_spec(s), Error);
  s.types.clear();
  s.eos = 5;
  EXPECT_THROW(Tokenizer::from_spec(s), Error);
  s.eos = -1;
  s.kind = TokenizerKind::SentencePieceBpe;
  EXPECT_THROW(Tokenizer::from_spec(s), Error);  // no scores
}

TEST(Loaders, GgufPreTokenizerPresets) {
  bool im = false, ab = false;
  EXPECT_EQ(tok::gguf_pre_regexes("smollm", &im, &ab).size(), 2u);
  EXPECT_EQ(tok::gguf_pre_regexes("default", &im, &ab).size(), 4u);
  EXPECT_EQ(tok::gguf_pre_regexes("qwen2", &im, &ab).size(), 1u);
  EXPECT_FALSE(im);
  EXPECT_EQ(tok::gguf_pre_regexes("llama-bpe", &im, &ab).size(), 1u);
  EXPECT_TRUE(im);
  EXPECT_TRUE(ab);
  EXPECT_THROW(tok::gguf_pre_regexes("no-such-pre", &im, &ab), Error);
  // Every preset compiles.
  for (const char* p : {"default", "gpt2", "llama3", "qwen2", "smollm"}) {
    for (const auto& re : tok::gguf_pre_regexes(p, &im, &ab)) EXPECT_NO_THROW(tok::Regex{re});
  }
}

TEST(Loaders, RegexSplitKeepsGapsAndMatches) {
  tok::Regex re(R"(\p{N})");
  std::vector<std::string_view> out;
  re.split("ab12c3", out);
  EXPECT_EQ(out, (std::vector<std::string_view>{"ab", "1", "2", "c", "3"}));
  std::vector<std::unique_ptr<tok::Regex>> seq;
  seq.push_back(std::make_unique<tok::Regex>(R"(\p{N})"));
  seq.push_back(std::make_unique<tok::Regex>(tok::kGpt2Regex));
  tok::pre_tokenize(seq, "Hi  there 42x's", out);
  EXPECT_EQ(out, (std::vector<std::string_view>{"Hi", " ", " there", " ", "4", "2", "x", "'s"}));
}

// ---------------------------------------------------------------- GGUF metadata

std::vector<uint8_t> spm_gguf(const TokenizerSpec& s, const std::string& model, bool prefix,
                              size_t n_types) {
  test::GgufWriter w;
  std::vector<int32_t> types;
  for (size_t i = 0; i < n_types; ++i) types.push_back(int32_t(s.types[i % s.types.size()]));
  w.header(3, 0, 8);
  w.kv_str("tokenizer.ggml.model", model);
  w.kv_str_array("tokenizer.ggml.tokens", s.pieces);
  w.kv_f32_array("tokenizer.ggml.scores", s.scores);
  w.kv_i32_array("tokenizer.ggml.token_type", types);
  w.kv_bool("tokenizer.ggml.add_space_prefix", prefix);
  w.kv_u32("tokenizer.ggml.bos_token_id", 1);
  w.kv_u32("tokenizer.ggml.eos_token_id", 2);
  w.kv_u32("tokenizer.ggml.eot_token_id", 0);
  w.pad(32);
  return w.b;
}

TEST(Gguf, LlamaVocabularyMatchesSpec) {
  for (bool prefix : {true, false}) {
    SpmVocab v(true, prefix);
    auto bytes = spm_gguf(v.spec, "llama", prefix, v.spec.pieces.size());
    auto g = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
    auto from_gguf = Tokenizer::from_gguf(*g);
    auto from_spec = Tokenizer::from_spec(v.spec);
    EXPECT_EQ(from_gguf->kind(), TokenizerKind::SentencePieceBpe);
    EXPECT_TRUE(from_gguf->add_bos());  // llama default when the key is absent
    EXPECT_EQ(from_gguf->bos_id(), 1);
    EXPECT_TRUE(from_gguf->is_eog(0));  // eot_token_id
    for (const char* s : {"abc abc", " ab  d", "<s>ca\xC3\xA9" "b</s>", "dddd"}) {
      EXPECT_EQ(from_gguf->encode(s), from_spec->encode(s)) << s;
      EXPECT_EQ(from_gguf->decode(from_gguf->encode(s)), s);
    }
  }
}

TEST(Gguf, ErrorsNameTheKey) {
  SpmVocab v(false, true);
  auto expect_error = [](const std::vector<uint8_t>& bytes, const std::string& needle) {
    auto g = GgufFile::from_memory(bytes.data(), bytes.size(), "mem.gguf");
    try {
      Tokenizer::from_gguf(*g);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(spm_gguf(v.spec, "bert", true, v.spec.pieces.size()), "'bert'");
  expect_error(spm_gguf(v.spec, "llama", true, 3), "token_type");
  test::GgufWriter w;
  w.header(3, 0, 4);
  w.kv_str("tokenizer.ggml.model", "gpt2");
  w.kv_str_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.kv_str_array("tokenizer.ggml.merges", {"a b"});
  w.kv_str("tokenizer.ggml.pre", "no-such-pre");
  expect_error(w.b, "no-such-pre");
}

}  // namespace
}  // namespace wgllm
