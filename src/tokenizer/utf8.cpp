// UTF-8 validation and the streaming decoder's "complete characters only" logic.
// Well-formedness is checked by utf8proc_iterate (rejects overlongs, surrogates, > U+10FFFF);
// the only hand-written part is recognising a *prefix* of a well-formed sequence, which no
// library exposes (Unicode 15 core spec, table 3-7).
#include <utf8proc.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm {

std::optional<size_t> validate_utf8(std::string_view text) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    utf8proc_int32_t cp = 0;
    utf8proc_ssize_t len = utf8proc_iterate(p + i, utf8proc_ssize_t(n - i), &cp);
    if (len <= 0) return i;
    i += size_t(len);
  }
  return std::nullopt;
}

namespace {

// Length of the longest prefix of p[0..n) that can still be completed to a well-formed
// sequence, and the full length that sequence needs; {0, 0} for a byte that cannot start one.
std::pair<size_t, size_t> utf8_prefix(const unsigned char* p, size_t n) {
  unsigned char c = p[0];
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return {0, 0};
  }
  size_t k = 1;
  while (k < need && k < n) {
    unsigned char b = p[k];
    bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++k;
  }
  return {k, need};
}

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Moves the complete part of `buf` to the result; keeps a trailing incomplete sequence in buf
// unless `final`, in which case it becomes U+FFFD.
std::string take_complete(std::string& buf, bool final) {
  std::string out;
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  const size_t n = buf.size();
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      out += char(p[i++]);
      continue;
    }
    auto [k, need] = utf8_prefix(p + i, n - i);
    if (k != 0 && k == need) {
      out.append(buf, i, k);
      i += k;
    } else if (k != 0 && i + k == n && !final) {
      break;  // incomplete at the end: wait for more bytes
    } else {
      out += kReplacement;  // maximal ill-formed subpart -> one U+FFFD
      i += k == 0 ? 1 : k;
    }
  }
  buf.erase(0, i);
  return out;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& t = tok_.impl();
  t.append_piece(id, skip_special_, after_special_, pending_);
  TokenType ty = t.types[id];
  after_special_ = ty == TokenType::Control || ty == TokenType::UserDefined || ty == TokenType::Unknown;
  return take_complete(pending_, false);
}

std::string StreamDecoder::flush() {
  std::string out = take_complete(pending_, true);
  pending_.clear();
  return out;
}

}  // namespace wgllm
