// Internal state of wgllm::Tokenizer and the pieces of the pipeline (not a public API).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace wgllm::tok {

/// Hash usable for heterogeneous lookup (find(string_view) in an unordered_map<string, ...>).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// ---- byte_level.cpp: GPT-2 bytes_to_unicode (openai/gpt-2 src/encoder.py; HF tokenizers
// src/pre_tokenizers/byte_level.rs). Printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100.. in order.
/// UTF-8 of the character byte b maps to.
const std::string& byte_to_unicode(uint8_t b);
/// Undoes the mapping for a stored token text; characters outside the mapping are kept as
/// their UTF-8 (HF ByteLevel decoder does the same for unknown chars).
std::string byte_level_decode(std::string_view stored);

// ---- pretokenizer.cpp
/// A compiled PCRE2 pattern (UTF | UCP, JIT when available).
class Regex {
 public:
  explicit Regex(const std::string& pattern);  // throws wgllm::Error naming the pattern
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  /// Appends to out the pieces of `text` (matches and non-empty gaps, in order). `text` must be
  /// valid UTF-8 (checked once by the caller; no per-call UTF check, which would be quadratic).
  void split(std::string_view text, std::vector<std::string_view>& out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

/// Applies regexes one after another (each splits every piece of the previous step).
void pre_tokenize(const std::vector<std::unique_ptr<Regex>>& regexes, std::string_view text,
                  std::vector<std::string_view>& out);
/// NFC via utf8proc; ASCII-only input is returned unchanged without calling it.
std::string nfc(std::string_view text);

/// Named pre-tokenizer presets, llama.cpp src/llama-vocab.cpp llm_tokenizer_bpe regex_exprs.
/// Sets *ignore_merges / *add_bos_default like llama.cpp's load() does for the pre type.
/// Throws wgllm::Error for an unknown name.
std::vector<std::string> gguf_pre_regexes(const std::string& pre, bool* ignore_merges,
                                          bool* add_bos_default);
/// The GPT-2 regex used by HF ByteLevel(use_regex=true).
extern const char* const kGpt2Regex;

// ---- bpe.cpp
struct MergeTable {
  struct Entry { int32_t rank; int32_t id; };
  std::unordered_map<uint64_t, Entry> map;  // key: (uint64(left) << 32) | uint32(right)
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
};
/// Byte-level BPE of one pre-token: `syms` holds the initial ids (one per byte); merges the
/// lowest-rank adjacent pair, leftmost first, until none applies (HF bpe/word.rs merge_all,
/// llama.cpp llm_tokenizer_bpe_session). O(n log n) with a heap and a linked list.
void bpe_merge(const MergeTable& merges, std::vector<int32_t>& syms);

/// SentencePiece-style merge of `text` (already "▁"-escaped): start from UTF-8 characters,
/// repeatedly merge the adjacent pair whose concatenation is a token with the highest score
/// (ties: leftmost); leftover pieces that are not tokens become <0xXX> byte tokens, else unk.
/// llama.cpp llm_tokenizer_spm_session::tokenize.
void spm_encode(const Tokenizer::Impl& t, std::string_view text, std::vector<int32_t>& out);

}  // namespace wgllm::tok

namespace wgllm {

struct Tokenizer::Impl {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  std::vector<std::string> pieces;      // stored text
  std::vector<std::string> bytes;       // decoded raw bytes (token_to_piece)
  std::vector<TokenType> types;
  std::vector<float> scores;
  tok::PieceMap piece_to_id;
  // byte-level BPE
  std::array<int32_t, 256> byte_to_id{};  // id of the single-byte token, -1 if missing
  tok::MergeTable merges;
  bool ignore_merges = false;
  // SentencePiece
  std::array<int32_t, 256> byte_fallback{};  // id of <0xXX>, -1 if missing
  bool add_space_prefix = true;
  // shared
  std::vector<std::unique_ptr<tok::Regex>> regexes;
  bool nfc = false;
  bool add_bos = false;
  int32_t bos = -1, eos = -1, unk = -1;
  std::vector<int32_t> eog;
  std::vector<uint8_t> is_eog;
  // added tokens matched as whole strings
  struct Added { int32_t id; bool special; };
  std::unordered_map<std::string, Added, tok::StringHash, std::equal_to<>> added;
  std::vector<size_t> added_lengths;  // distinct lengths, longest first
  std::array<bool, 256> added_first{};  // first bytes of added tokens

  /// Decoded bytes of id for detokenization (handles skip_special and the SPM dummy prefix).
  void append_piece(int32_t id, bool skip_special, bool first, std::string& out) const;
  void check_id(int32_t id) const;
};

}  // namespace wgllm
