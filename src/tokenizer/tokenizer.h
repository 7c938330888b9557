// wgllm tokenizer: byte-level BPE (GPT-2 / Qwen / SmolLM2 / Llama-3 style) and SentencePiece-style
// BPE by scores (LLaMA / Mistral style "llama" GGUF vocabularies), loaded from a HuggingFace
// tokenizer.json or from the tokenizer.* metadata of a GGUF file.
//
// Pipeline of encode() (mirrors HF tokenizers' TokenizerImpl::encode_single_sequence and
// llama.cpp's llama_vocab::impl::tokenize):
//   1. the input must be valid UTF-8, else wgllm::Error naming the byte offset (see below);
//   2. added/special tokens are matched as whole strings, leftmost-longest, on the raw text
//      (HF tokenizers src/tokenizer/added_vocabulary.rs; llama.cpp tokenizer_st_partition);
//   3. each remaining text span is normalized (NFC if the tokenizer has an NFC normalizer),
//      split by the pre-tokenizer regexes (PCRE2, applied in sequence, matches and gaps both
//      kept, i.e. HF Split behavior "Isolated"), mapped to GPT-2 byte-level symbols and merged
//      by BPE merge rank (HF tokenizers src/models/bpe/word.rs);
//      or, for SentencePiece-style vocabularies: spaces become U+2581 "▁", a "▁" is prepended
//      when add_space_prefix is set and the span starts the text or follows a special token,
//      and the whole span is merged by token score with <0xXX> byte fallback
//      (llama.cpp llm_tokenizer_spm_session).
//
// Invalid UTF-8 policy: byte-level BPE could represent any byte string, but the normalizer,
// the Unicode-aware pre-tokenizer regexes and SentencePiece all need characters, and silently
// replacing bytes would make decode(encode(x)) != x. So encode() rejects invalid UTF-8 (overlong
// forms, surrogates, code points above U+10FFFF, truncated sequences, stray continuation bytes)
// with a wgllm::Error whose message names the first bad byte offset; callers can check first with
// validate_utf8(). decode() returns the raw bytes of the tokens, which can be invalid UTF-8 when
// the ids cut a multi-byte character; StreamDecoder never emits invalid UTF-8.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgllm {

class GgufFile;

/// Offset of the first byte that does not start or continue a well-formed UTF-8 sequence
/// (Unicode 15, table 3-7: no overlongs, no surrogates, nothing above U+10FFFF), or nullopt when
/// the whole string is valid. A sequence truncated by the end of the string is reported at its
/// lead byte.
std::optional<size_t> validate_utf8(std::string_view text);

enum class TokenizerKind {
  ByteLevelBpe,      ///< GPT-2 byte-to-unicode mapping + BPE merges by rank (GGUF "gpt2")
  SentencePieceBpe,  ///< "▁" spaces, BPE by token score, <0xXX> byte fallback (GGUF "llama")
};

/// Token attributes, numbered as GGUF tokenizer.ggml.token_type (llama.cpp llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

/// Everything a Tokenizer is built from. The loaders fill one; tests can build a synthetic one.
struct TokenizerSpec {
  TokenizerKind kind = TokenizerKind::ByteLevelBpe;
  /// Token text by id, as stored in the vocabulary: GPT-2 byte-level characters ("Ġthe") for
  /// normal ByteLevelBpe tokens, "▁the" / "<0x0A>" for SentencePiece. Control, UserDefined and
  /// Unknown tokens hold their literal text and are matched as whole strings by encode().
  /// Empty strings are allowed (holes in the id space) and never produced.
  std::vector<std::string> pieces;
  std::vector<TokenType> types;  ///< same size as pieces, or empty (= all Normal)
  std::vector<float> scores;     ///< SentencePieceBpe: merge priority (higher first)
  /// ByteLevelBpe merges in rank order (rank = index). Merges naming unknown pieces are ignored.
  std::vector<std::pair<std::string, std::string>> merges;
  /// Pre-tokenizer: PCRE2 patterns applied one after another to every piece (UTF+UCP mode);
  /// each keeps matches and the gaps between them as separate pieces (HF "Isolated").
  std::vector<std::string> pretokenizer_regexes;
  bool nfc = false;               ///< NFC-normalize text spans before pre-tokenizing
  bool ignore_merges = false;     ///< a whole pre-token found in the vocab wins (Llama-3, HF BPE)
  bool add_space_prefix = true;   ///< SentencePieceBpe only
  bool add_bos = false;           ///< model wants BOS at the start of a prompt (encode_prompt)
  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  std::vector<int32_t> extra_eog;  ///< more end-of-generation ids
};

class Tokenizer {
 public:
  static constexpr int32_t kNoToken = -1;

  /// Loads a HuggingFace tokenizer.json (model BPE; normalizer null/NFC/Sequence of those;
  /// pre_tokenizer Split(Isolated)/Digits/ByteLevel or a Sequence of them; decoder ByteLevel).
  /// A tokenizer_config.json in the same directory, when present, supplies bos_token,
  /// eos_token and add_bos_token. Throws wgllm::Error naming the file and the unsupported or
  /// malformed field. Reference: HF tokenizers src/tokenizer/serialization.rs.
  static std::unique_ptr<Tokenizer> from_hf_json(const std::string& tokenizer_json_path);

  /// Builds from GGUF tokenizer.* metadata. tokenizer.ggml.model "gpt2" (pre-tokenizer chosen by
  /// tokenizer.ggml.pre the way llama.cpp src/llama-vocab.cpp does: default, gpt2/gpt-2, llama3/
  /// llama-bpe, qwen2, smollm/starcoder and their aliases) or "llama" (SentencePiece-style).
  /// Throws wgllm::Error naming the key on missing/unsupported metadata.
  static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);

  /// Builds from an explicit spec (validates sizes and ids; throws wgllm::Error).
  static std::unique_ptr<Tokenizer> from_spec(TokenizerSpec spec);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  /// Text -> ids. Never adds BOS/EOS (see encode_prompt). parse_special=true: every added token
  /// (Control, UserDefined, Unknown) is recognised in the text. parse_special=false: Control and
  /// Unknown tokens (HF "special": true) are tokenized as plain text, UserDefined tokens (HF
  /// added tokens with "special": false, e.g. Qwen's <think>) are still matched, as in HF with
  /// encode_special_tokens=true. Throws wgllm::Error on invalid UTF-8 (names the byte offset).
  /// Thread-safe (const, no shared mutable state).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;

  /// encode() with bos_id() prepended when add_bos() is true (the model's preference from
  /// tokenizer.ggml.add_bos_token / tokenizer_config add_bos_token). Use for a fresh prompt.
  std::vector<int32_t> encode_prompt(std::string_view text, bool parse_special = true) const;

  /// Ids -> bytes: concatenation of token_to_piece. skip_special drops Control tokens.
  /// SentencePiece with add_space_prefix: one leading space of the first token is removed
  /// (the dummy prefix; HF decoder Strip(start=1), llama.cpp detokenize remove_special).
  /// Throws wgllm::Error on an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  /// The raw bytes a token stands for (byte-level / ▁ / <0xXX> undone; literal text for
  /// Control/UserDefined tokens). Throws wgllm::Error on an out-of-range id.
  std::string token_to_piece(int32_t id) const;

  /// Token text as stored in the vocabulary (e.g. "Ġthe"), or throws on an out-of-range id.
  const std::string& token_text(int32_t id) const;
  /// Id of a stored token text ("Ġthe", "▁the", "<|im_end|>"), or kNoToken.
  int32_t token_id(std::string_view stored_text) const;
  TokenType token_type(int32_t id) const;

  int32_t bos_id() const;  ///< kNoToken if the model has none
  int32_t eos_id() const;  ///< kNoToken if the model has none
  bool add_bos() const;
  /// End of generation: eos, eot, eom, and tokens named <|im_end|>, <|endoftext|>, <|eot_id|>,
  /// <|eom_id|>, <|end|>, <end_of_turn>, <|end_of_text|>, <EOT> (as llama.cpp llama-vocab.cpp
  /// collects special_eog_ids).
  bool is_eog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;
  size_t vocab_size() const;
  TokenizerKind kind() const;

  /// Internal state (tokenizer_impl.h); for StreamDecoder and white-box tests only.
  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Incremental detokenizer for streaming generation output. push() returns only complete,
/// valid UTF-8 text; a trailing incomplete multi-byte sequence is held back until the next
/// token completes it. Bytes that can never become valid UTF-8 are replaced by U+FFFD, so the
/// concatenated output is always valid UTF-8 and equals decode() whenever decode() is valid.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  /// Appends one token; returns the newly completed text (possibly empty). Throws on a bad id.
  std::string push(int32_t id);
  /// End of stream: returns what is held back, an incomplete sequence replaced by U+FFFD.
  std::string flush();
  /// Forget everything (start of a new, independent stream).
  void reset();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  bool after_special_ = true;  // start of stream or after a special token (SPM dummy prefix)
  std::string pending_;
};

}  // namespace wgllm
