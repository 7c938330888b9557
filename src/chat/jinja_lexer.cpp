// Mirrors jinja2/lexer.py (3.1): root state scans lazily for the first "{{", "{%" or "{#";
// `{%-`/`-%}` strip all whitespace (Python's \s, Unicode-aware) on that side; lstrip_blocks removes
// spaces/tabs between a line start and a block/comment tag (not `{{`, not `{%+`); trim_blocks drops
// the first newline after `%}` / `#}` (never after `}}`, and not after `{% raw %}`); end tags are only
// recognised while brackets are balanced, so `{{ {'a': {'b': 1}} }}` lexes.
#include "chat/jinja_lexer.h"

#include <cstdint>
#include <cstdlib>

#include <utf8proc.h>

#include "chat/jinja_value.h"
#include "core/error.h"

namespace wgllm::jinja {

void syntax_error(int line, int col, const std::string& message) {
  throw Error("chat template syntax error at " + std::to_string(line) + ":" + std::to_string(col) + ": " +
              message);
}

std::string normalize_source(const std::string& source) {
  std::string s;
  s.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      s += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      s += source[i];
    }
  }
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

namespace {

class Lexer {
 public:
  explicit Lexer(const std::string& src) : s_(normalize_source(src)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i)
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    bool line_starting = true;
    size_t pos = 0;
    const size_t n = s_.size();
    while (pos < n) {
      size_t t = find_tag(pos);
      if (t == std::string::npos) {
        emit_data(s_.substr(pos), pos);
        break;
      }
      char kind = s_[t + 1];
      char sign = (t + 2 < n && (s_[t + 2] == '-' || s_[t + 2] == '+')) ? s_[t + 2] : 0;
      size_t p = t + 2 + (sign ? 1 : 0);
      if (kind == '%' && is_raw_begin(p)) {
        emit_data(lstrip_text(s_.substr(pos, t - pos), sign, true, line_starting), pos);
        pos = lex_raw(p, line_starting);
        continue;
      }
      emit_data(lstrip_text(s_.substr(pos, t - pos), sign, kind != '{', line_starting), pos);
      if (kind == '#') {
        size_t j = s_.find("#}", p);
        if (j == std::string::npos) error(t, "missing end of comment tag");
        char esign = (j > p && (s_[j - 1] == '-' || s_[j - 1] == '+')) ? s_[j - 1] : 0;
        pos = after_end(j + 2, esign, true, line_starting);
      } else {
        pos = lex_tag(t, p, kind, line_starting);
      }
    }
    Token eof;
    eof.type = Tok::Eof;
    std::tie(eof.line, eof.col) = loc(s_.size());
    out_.push_back(eof);
    return std::move(out_);
  }

 private:
  std::pair<int, int> loc(size_t off) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= off) lo = mid;
      else hi = mid;
    }
    // Columns count code points from the line start. Tokens arrive in increasing offsets, so the
    // count continues from the previous call on the same line (linear, not quadratic, in the length
    // of a long one-line template).
    if (lo != loc_line_ || off < loc_off_) {
      loc_line_ = lo;
      loc_off_ = line_starts_[lo];
      loc_col_ = 0;
    }
    loc_col_ += utf8_length(std::string_view(s_).substr(loc_off_, off - loc_off_));
    loc_off_ = off;
    return {static_cast<int>(lo + 1), static_cast<int>(loc_col_ + 1)};
  }
  mutable size_t loc_line_ = SIZE_MAX, loc_off_ = 0, loc_col_ = 0;  // loc()'s resume point
  [[noreturn]] void error(size_t off, const std::string& msg) const {
    auto [l, c] = loc(off);
    syntax_error(l, c, msg);
  }

  size_t find_tag(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos && i + 1 < s_.size(); i = s_.find('{', i + 1)) {
      char c = s_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  // Length of the Unicode whitespace code point at p (0 if none).
  size_t ws_at(size_t p) const {
    if (p >= s_.size()) return 0;
    utf8proc_int32_t cp = 0;
    auto k = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s_.data() + p),
                              static_cast<utf8proc_ssize_t>(s_.size() - p), &cp);
    if (k <= 0 || !py_isspace(static_cast<char32_t>(cp))) return 0;
    return static_cast<size_t>(k);
  }
  size_t skip_ws(size_t p) const {
    while (size_t k = ws_at(p)) p += k;
    return p;
  }

  // Whitespace control on the text before a tag (jinja2 tokeniter's lstrip handling).
  std::string lstrip_text(std::string text, char sign, bool block_like, bool line_starting) const {
    if (sign == '-') return py_strip(text, nullptr, false, true);
    if (sign == '+' || !block_like) return text;
    size_t l_pos = text.rfind('\n');
    l_pos = (l_pos == std::string::npos) ? 0 : l_pos + 1;
    if (l_pos == 0 && !line_starting) return text;
    std::string tail = text.substr(l_pos);
    if (!tail.empty() && py_strip(tail, nullptr, true, false).empty()) text.resize(l_pos);
    return text;
  }

  // Position after an end tag ending at `p`; updates line_starting like jinja2 (last char '\n').
  size_t after_end(size_t p, char sign, bool trim, bool& line_starting) const {
    size_t e = p;
    if (sign == '-') e = skip_ws(p);
    else if (sign != '+' && trim && e < s_.size() && s_[e] == '\n') ++e;
    line_starting = e > p && s_[e - 1] == '\n';
    return e;
  }

  bool match_word(size_t& p, std::string_view w) const {
    if (s_.compare(p, w.size(), w) != 0) return false;
    p += w.size();
    return true;
  }

  bool is_raw_begin(size_t p) const {
    p = skip_ws(p);
    if (!match_word(p, "raw")) return false;
    p = skip_ws(p);
    return s_.compare(p, 3, "-%}") == 0 || s_.compare(p, 2, "%}") == 0;
  }

  size_t lex_raw(size_t p, bool& line_starting) {
    p = skip_ws(p);
    match_word(p, "raw");
    p = skip_ws(p);
    size_t start = p;
    if (s_.compare(p, 3, "-%}") == 0) p = skip_ws(p + 3);
    else p += 2;
    line_starting = p > start && s_[p - 1] == '\n';
    for (size_t k = s_.find("{%", p); k != std::string::npos; k = s_.find("{%", k + 1)) {
      size_t q = k + 2;
      char sign = (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ? s_[q] : 0;
      if (sign) ++q;
      q = skip_ws(q);
      if (!match_word(q, "endraw")) continue;
      q = skip_ws(q);
      char esign = 0;
      if (s_.compare(q, 3, "-%}") == 0 || s_.compare(q, 3, "+%}") == 0) esign = s_[q++];
      else if (s_.compare(q, 2, "%}") != 0) continue;
      emit_data(lstrip_text(s_.substr(p, k - p), sign, true, line_starting), p);
      return after_end(q + 2, esign, true, line_starting);
    }
    error(start, "missing end of raw directive");
  }

  void emit_data(std::string text, size_t off) {
    if (text.empty()) return;
    Token t;
    t.type = Tok::Data;
    t.text = std::move(text);
    std::tie(t.line, t.col) = loc(off);
    out_.push_back(std::move(t));
  }

  void push(Tok type, size_t off, std::string text = {}) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    std::tie(t.line, t.col) = loc(off);
    out_.push_back(std::move(t));
  }

  // Byte length of an identifier character at p (Python identifiers: ASCII letters, digits, '_',
  // and non-ASCII letters / marks / digits / connectors), or 0.
  size_t name_char(size_t p, bool start) const {
    if (p >= s_.size()) return 0;
    unsigned char c = static_cast<unsigned char>(s_[p]);
    if (c < 0x80) return (is_name_start(static_cast<char>(c)) || (!start && is_digit(static_cast<char>(c)))) ? 1 : 0;
    utf8proc_int32_t cp = 0;
    auto k = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s_.data() + p),
                              static_cast<utf8proc_ssize_t>(s_.size() - p), &cp);
    if (k <= 0) return 0;
    auto cat = utf8proc_category(cp);
    bool letter = (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) || cat == UTF8PROC_CATEGORY_NL;
    bool cont = cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ND ||
                cat == UTF8PROC_CATEGORY_PC;
    return (letter || (!start && cont)) ? static_cast<size_t>(k) : 0;
  }

  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

  // digits with single underscores between them: (\d+_)*\d+ ; returns end or npos.
  size_t digits(size_t p) const {
    if (p >= s_.size() || !is_digit(s_[p])) return std::string::npos;
    while (p < s_.size() && (is_digit(s_[p]) || (s_[p] == '_' && p + 1 < s_.size() && is_digit(s_[p + 1]))))
      ++p;
    return p;
  }

  size_t lex_tag(size_t t, size_t p, char kind, bool& line_starting) {
    push(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, t);
    std::vector<char> brackets;
    const size_t n = s_.size();
    for (;;) {
      p = skip_ws(p);
      if (p >= n) error(t, kind == '{' ? "unexpected end of template, expected '}}'" : "unexpected end of template, expected '%}'");
      if (brackets.empty()) {
        char close = kind == '{' ? '}' : '%';
        size_t e = p;
        char sign = 0;
        if ((s_[e] == '-' || (s_[e] == '+' && kind == '%')) && e + 2 < n && s_[e + 1] == close && s_[e + 2] == '}')
          sign = s_[e++];
        if (e + 1 < n && s_[e] == close && s_[e + 1] == '}') {
          push(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, p);
          return after_end(e + 2, sign, kind == '%', line_starting);
        }
      }
      char c = s_[p];
      if (is_digit(c)) {
        size_t e = digits(p);
        bool is_float = false;
        bool after_dot = p > 0 && s_[p - 1] == '.';
        if (!after_dot) {
          size_t f = e;
          if (f + 1 < n && s_[f] == '.' && is_digit(s_[f + 1])) {
            f = digits(f + 1);
            is_float = true;
          }
          if (f < n && (s_[f] == 'e' || s_[f] == 'E')) {
            size_t g = f + 1;
            if (g < n && (s_[g] == '+' || s_[g] == '-')) ++g;
            if (size_t h = digits(g); h != std::string::npos) {
              f = h;
              is_float = true;
            }
          }
          if (is_float) e = f;
        }
        int base = 10;
        size_t skip = 0;
        if (!is_float && c == '0') {  // jinja2 integer_re: 0b.. 0o.. 0x.., else "0" may only repeat
          char k = p + 1 < n ? static_cast<char>(s_[p + 1] | 0x20) : 0;
          base = k == 'b' ? 2 : (k == 'o' ? 8 : (k == 'x' ? 16 : 10));
          if (base != 10) {
            skip = 2;
            e = p + 2;
            auto ok = [&](char d) {
              return base == 16 ? std::isxdigit(static_cast<unsigned char>(d)) != 0 : (d >= '0' && d < '0' + base);
            };
            while (e < n && (ok(s_[e]) || (s_[e] == '_' && e + 1 < n && ok(s_[e + 1])))) ++e;
            if (e == p + 2) error(p, "invalid integer literal");
          } else {
            e = p + 1;
            while (e < n && (s_[e] == '0' || (s_[e] == '_' && e + 1 < n && s_[e + 1] == '0'))) ++e;
          }
        }
        std::string num;
        for (size_t i = p + skip; i < e; ++i)
          if (s_[i] != '_') num += s_[i];
        push(is_float ? Tok::Float : Tok::Int, p, num);
        if (is_float) out_.back().fval = std::strtod(num.c_str(), nullptr);
        else out_.back().ival = std::strtoll(num.c_str(), nullptr, base);
        p = e;
      } else if (name_char(p, true)) {
        size_t e = p;
        while (size_t k = name_char(e, false)) e += k;
        push(Tok::Name, p, s_.substr(p, e - p));
        p = e;
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* two[] = {"//", "**", "==", "!=", "<=", ">="};
        std::string op;
        for (const char* o : two)
          if (s_.compare(p, 2, o) == 0) op = o;
        if (op.empty()) {
          if (std::string_view("+-*/%~[](){}<>=.:|,;").find(c) == std::string_view::npos) {
            std::u32string one = utf8_decode(std::string_view(s_).substr(p, 4)).substr(0, 1);
            error(p, "unexpected char '" + utf8_encode(one) + "'");
          }
          op = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') {
            brackets.push_back(c);
          } else if (c == ')' || c == ']' || c == '}') {
            char want = c == ')' ? '(' : (c == ']' ? '[' : '{');
            if (brackets.empty() || brackets.back() != want) error(p, std::string("unexpected '") + c + "'");
            brackets.pop_back();
          }
        }
        push(Tok::Op, p, op);
        p += op.size();
      }
    }
  }

  // Python string literal semantics (jinja2 decodes with "unicode-escape").
  size_t lex_string(size_t p) {
    char q = s_[p];
    std::u32string out;
    size_t i = p + 1;
    const size_t n = s_.size();
    auto hexval = [&](size_t at, int len) -> long {
      if (at + len > n) error(at, "truncated escape in string literal");
      std::string h = s_.substr(at, len);
      char* end = nullptr;
      long v = std::strtol(h.c_str(), &end, 16);
      if (end != h.c_str() + len) error(at, "invalid escape in string literal");
      return v;
    };
    std::string raw;  // undecoded UTF-8 run
    auto flush = [&] {
      out += utf8_decode(raw);
      raw.clear();
    };
    for (;;) {
      if (i >= n) error(p, "unexpected end of string literal");
      char c = s_[i];
      if (c == q) break;
      if (c != '\\') {
        raw += c;
        ++i;
        continue;
      }
      flush();
      if (i + 1 >= n) error(p, "unexpected end of string literal");
      char e = s_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += U'\n'; break;
        case 't': out += U'\t'; break;
        case 'r': out += U'\r'; break;
        case 'a': out += U'\a'; break;
        case 'b': out += U'\b'; break;
        case 'f': out += U'\f'; break;
        case 'v': out += U'\v'; break;
        case '\\': out += U'\\'; break;
        case '\'': out += U'\''; break;
        case '"': out += U'"'; break;
        case '\n': break;  // line continuation
        case 'x': out += static_cast<char32_t>(hexval(i, 2)); i += 2; break;
        case 'u': out += static_cast<char32_t>(hexval(i, 4)); i += 4; break;
        case 'U': out += static_cast<char32_t>(hexval(i, 8)); i += 8; break;
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int k = 0; k < 2 && i < n && s_[i] >= '0' && s_[i] <= '7'; ++k) v = v * 8 + (s_[i++] - '0');
            out += static_cast<char32_t>(v);
          } else {  // unknown escapes are kept verbatim, as in Python
            out += U'\\';
            --i;
          }
      }
    }
    flush();
    push(Tok::String, p, utf8_encode(out));
    return i + 1;
  }

  std::string s_;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace wgllm::jinja
