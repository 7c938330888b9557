// wgllm::Tokenizer: construction from a TokenizerSpec, encode/decode and vocabulary queries.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm {

using tok::MergeTable;

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_spec(TokenizerSpec spec) {
  auto t = std::make_unique<Impl>();
  const size_t n = spec.pieces.size();
  if (n == 0) throw Error("tokenizer: empty vocabulary");
  if (n > size_t(INT32_MAX)) throw Error("tokenizer: vocabulary too large");
  if (!spec.types.empty() && spec.types.size() != n) {
    throw Error("tokenizer: " + std::to_string(spec.types.size()) + " token types for " +
                std::to_string(n) + " tokens");
  }
  if (spec.kind == TokenizerKind::SentencePieceBpe && spec.scores.size() != n) {
    throw Error("tokenizer: SentencePiece vocabulary needs one score per token (" +
                std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) +
                " tokens)");
  }
  auto check = [&](int32_t id, const char* what) {
    if (id < -1 || id >= int32_t(n)) {
      throw Error(std::string("tokenizer: ") + what + " id " + std::to_string(id) +
                  " outside the vocabulary of " + std::to_string(n));
    }
  };
  check(spec.bos, "bos");
  check(spec.eos, "eos");
  check(spec.unk, "unk");
  check(spec.eot, "eot");
  check(spec.eom, "eom");
  for (int32_t id : spec.extra_eog) check(id, "eog");

  t->kind = spec.kind;
  t->pieces = std::move(spec.pieces);
  t->types = spec.types.empty() ? std::vector<TokenType>(n, TokenType::Normal)
                                : std::move(spec.types);
  t->scores = std::move(spec.scores);
  t->ignore_merges = spec.ignore_merges;
  t->add_space_prefix = spec.add_space_prefix;
  t->nfc = spec.nfc;
  t->add_bos = spec.add_bos && spec.bos >= 0;
  t->bos = spec.bos;
  t->eos = spec.eos;
  t->unk = spec.unk;

  t->piece_to_id.reserve(n);
  t->bytes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& p = t->pieces[i];
    if (!p.empty()) t->piece_to_id.emplace(p, int32_t(i));  // first id wins on duplicates
    TokenType ty = t->types[i];
    bool literal = ty == TokenType::Control || ty == TokenType::UserDefined ||
                   ty == TokenType::Unknown;
    if (literal) {
      t->bytes[i] = p;
      if (!p.empty()) t->added.emplace(p, Impl::Added{int32_t(i), ty != TokenType::UserDefined});
    } else if (spec.kind == TokenizerKind::ByteLevelBpe) {
      t->bytes[i] = tok::byte_level_decode(p);
    } else if (ty == TokenType::Byte && p.size() == 6 && p.starts_with("<0x") && p[5] == '>') {
      auto hex = [&](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        throw Error("tokenizer: byte token " + std::to_string(i) + " '" + p + "' is not <0xXX> with two hex digits");
      };
      t->bytes[i] = std::string(1, char(hex(p[3]) * 16 + hex(p[4])));
    } else {  // SentencePiece: U+2581 stands for a space
      std::string s;
      for (size_t k = 0; k < p.size();) {
        if (p.compare(k, 3, "\xE2\x96\x81") == 0) {
          s += ' ';
          k += 3;
        } else {
          s += p[k++];
        }
      }
      t->bytes[i] = std::move(s);
    }
  }
  for (const auto& [text, a] : t->added) {
    t->added_first[static_cast<unsigned char>(text[0])] = true;
    if (std::find(t->added_lengths.begin(), t->added_lengths.end(), text.size()) ==
        t->added_lengths.end()) {
      t->added_lengths.push_back(text.size());
    }
  }
  std::sort(t->added_lengths.rbegin(), t->added_lengths.rend());

  t->byte_to_id.fill(-1);
  t->byte_fallback.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (spec.kind == TokenizerKind::ByteLevelBpe) {
      auto it = t->piece_to_id.find(tok::byte_to_unicode(uint8_t(b)));
      if (it != t->piece_to_id.end()) t->byte_to_id[b] = it->second;
    } else {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      auto it = t->piece_to_id.find(std::string_view(name));
      if (it != t->piece_to_id.end()) t->byte_fallback[b] = it->second;
    }
  }
  if (spec.kind == TokenizerKind::ByteLevelBpe) {
    t->merges.map.reserve(spec.merges.size());
    for (size_t r = 0; r < spec.merges.size(); ++r) {
      const auto& [a, b] = spec.merges[r];
      auto ia = t->piece_to_id.find(a), ib = t->piece_to_id.find(b),
           iab = t->piece_to_id.find(a + b);
      if (ia == t->piece_to_id.end() || ib == t->piece_to_id.end() ||
          iab == t->piece_to_id.end()) {
        continue;  // HF would reject the file; a merge that can never apply is harmless
      }
      t->merges.map.emplace(MergeTable::key(ia->second, ib->second),
                            MergeTable::Entry{int32_t(r), iab->second});
    }
  }
  for (const std::string& re : spec.pretokenizer_regexes) {
    t->regexes.push_back(std::make_unique<tok::Regex>(re));
  }

  // End-of-generation ids (llama.cpp llama_vocab::impl::load, special_eog_ids).
  t->is_eog.assign(n, 0);
  auto add_eog = [&](int32_t id) {
    if (id >= 0 && !t->is_eog[id]) {
      t->is_eog[id] = 1;
      t->eog.push_back(id);
    }
  };
  add_eog(spec.eos);
  add_eog(spec.eot);
  add_eog(spec.eom);
  for (int32_t id : spec.extra_eog) add_eog(id);
  static const char* const kEogNames[] = {"<|im_end|>", "<|endoftext|>", "<|eot_id|>",
                                          "<|eom_id|>", "<|end|>", "<end_of_turn>",
                                          "<|end_of_text|>", "<EOT>", "_<EOT>", "<|return|>"};
  for (const char* name : kEogNames) {
    auto it = t->added.find(std::string_view(name));
    if (it != t->added.end()) add_eog(it->second.id);
  }
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(t)));
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || size_t(id) >= pieces.size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " outside the vocabulary of " +
                std::to_string(pieces.size()));
  }
}

void Tokenizer::Impl::append_piece(int32_t id, bool skip_special, bool after_special,
                                   std::string& out) const {
  check_id(id);
  TokenType ty = types[id];
  if (skip_special && ty == TokenType::Control) return;
  const std::string& b = bytes[id];
  // Undo the SentencePiece dummy prefix that encode() adds at the start / after a special token.
  if (kind == TokenizerKind::SentencePieceBpe && add_space_prefix && after_special &&
      ty == TokenType::Normal && !b.empty() && b[0] == ' ') {
    out.append(b, 1);
  } else {
    out += b;
  }
}

namespace {

bool is_literal(TokenType ty) {
  return ty == TokenType::Control || ty == TokenType::UserDefined || ty == TokenType::Unknown;
}

// Per-call cache of pre-token -> ids (natural text repeats words heavily).
using WordCache = std::unordered_map<std::string, std::vector<int32_t>, tok::StringHash,
                                     std::equal_to<>>;

void encode_byte_level(const Tokenizer::Impl& t, std::string_view span, WordCache& cache,
                       std::vector<std::string_view>& pieces, std::vector<int32_t>& out) {
  std::string normalized;
  if (t.nfc) {
    normalized = tok::nfc(span);
    span = normalized;
  }
  tok::pre_tokenize(t.regexes, span, pieces);
  std::vector<int32_t> ids;
  for (std::string_view p : pieces) {
    auto it = cache.find(p);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      continue;
    }
    ids.clear();
    if (t.ignore_merges) {  // HF BPE ignore_merges / llama.cpp tokenizer_ignore_merges
      std::string mapped;
      for (unsigned char c : p) mapped += tok::byte_to_unicode(c);
      auto w = t.piece_to_id.find(mapped);
      if (w != t.piece_to_id.end()) ids.push_back(w->second);
    }
    if (ids.empty()) {
      for (unsigned char c : p) {
        int32_t id = t.byte_to_id[c];
        if (id < 0) id = t.unk;
        if (id < 0) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02X", c);
          throw Error(std::string("tokenizer: byte ") + hex +
                      " has no byte-level token and there is no unknown token");
        }
        ids.push_back(id);
      }
      tok::bpe_merge(t.merges, ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
    cache.emplace(std::string(p), ids);
  }
}

void encode_spm(const Tokenizer::Impl& t, std::string_view span, bool after_special,
                std::vector<int32_t>& out) {
  std::string s;
  s.reserve(span.size() + 16);
  if (t.add_space_prefix && after_special) s += "\xE2\x96\x81";
  for (char c : span) {
    if (c == ' ') {
      s += "\xE2\x96\x81";
    } else {
      s += c;
    }
  }
  tok::spm_encode(t, s, out);
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  if (auto bad = validate_utf8(text)) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(text[*bad]));
    throw Error("tokenizer: invalid UTF-8 in input at byte offset " + std::to_string(*bad) +
                " (byte " + hex + ")");
  }
  const Impl& t = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  WordCache cache;
  std::vector<std::string_view> pieces;
  bool after_special = true;  // the start of the text counts as "after a special token"
  auto encode_span = [&](std::string_view span) {
    if (span.empty()) return;
    if (t.kind == TokenizerKind::SentencePieceBpe) {
      encode_spm(t, span, after_special, out);
    } else {
      encode_byte_level(t, span, cache, pieces, out);
    }
    after_special = false;
  };
  size_t seg = 0;
  if (!t.added.empty()) {
    for (size_t pos = 0; pos < text.size();) {
      bool matched = false;
      if (t.added_first[static_cast<unsigned char>(text[pos])]) {
        for (size_t len : t.added_lengths) {  // longest first: leftmost-longest like HF
          if (len > text.size() - pos) continue;
          auto it = t.added.find(text.substr(pos, len));
          if (it == t.added.end() || (!parse_special && it->second.special)) continue;
          encode_span(text.substr(seg, pos - seg));
          out.push_back(it->second.id);
          after_special = true;
          pos += len;
          seg = pos;
          matched = true;
          break;
        }
      }
      if (!matched) ++pos;
    }
  }
  encode_span(text.substr(seg));
  return out;
}

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids = encode(text, parse_special);
  if (impl_->add_bos) ids.insert(ids.begin(), impl_->bos);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  bool after_special = true;
  for (int32_t id : ids) {
    impl_->append_piece(id, skip_special, after_special, out);
    after_special = is_literal(impl_->types[id]);
  }
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  impl_->check_id(id);
  return impl_->bytes[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->pieces[id];
}

int32_t Tokenizer::token_id(std::string_view stored_text) const {
  auto it = impl_->piece_to_id.find(stored_text);
  return it == impl_->piece_to_id.end() ? kNoToken : it->second;
}

TokenType Tokenizer::token_type(int32_t id) const {
  impl_->check_id(id);
  return impl_->types[id];
}

int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && size_t(id) < impl_->is_eog.size() && impl_->is_eog[id];
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog; }
size_t Tokenizer::vocab_size() const { return impl_->pieces.size(); }
TokenizerKind Tokenizer::kind() const { return impl_->kind; }

// ---- StreamDecoder (UTF-8 completeness checks in utf8.cpp)

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tok_(tokenizer), skip_special_(skip_special) {}

void StreamDecoder::reset() {
  after_special_ = true;
  pending_.clear();
}

}  // namespace wgllm
