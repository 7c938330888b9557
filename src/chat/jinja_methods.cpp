// Python str / dict / list methods that ImmutableSandboxedEnvironment lets templates call
// (mutating list/dict methods are blocked there, so they are absent here), plus printf-style
// formatting and Unicode case mapping.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include <utf8proc.h>

#include "chat/jinja_builtins.h"

namespace wgllm::jinja {

static char32_t up(char32_t c) { return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
static char32_t lo(char32_t c) { return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
static char32_t ti(char32_t c) { return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }
static utf8proc_category_t cat(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }
static bool cased(char32_t c) {
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}
static bool is_alpha(char32_t c) {
  auto k = cat(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static bool is_digit(char32_t c) { return cat(c) == UTF8PROC_CATEGORY_ND; }
static bool is_numeric(char32_t c) {
  auto k = cat(c);
  return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

template <class F>
[[maybe_unused]] static std::string map_chars(std::string_view s, F f) {
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = f(c);
  return utf8_encode(u);
}
// Simple case mapping plus the common 1:n mappings of Unicode SpecialCasing.txt that Python applies.
std::string py_upper(std::string_view s) {
  std::u32string out;
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case 0xDF: out += U"SS"; break;
      case 0xFB00: out += U"FF"; break;
      case 0xFB01: out += U"FI"; break;
      case 0xFB02: out += U"FL"; break;
      case 0xFB03: out += U"FFI"; break;
      case 0xFB04: out += U"FFL"; break;
      case 0xFB05: case 0xFB06: out += U"ST"; break;
      case 0x149: out += U"\u02BCN"; break;
      default: out += up(c);
    }
  }
  return utf8_encode(out);
}
std::string py_lower(std::string_view s) {
  std::u32string out;
  for (char32_t c : utf8_decode(s)) {
    if (c == 0x130) out += U"i\u0307";
    else out += lo(c);
  }
  return utf8_encode(out);
}

static std::string py_title(std::string_view s) {  // str.title()
  std::u32string u = utf8_decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    c = prev_cased ? lo(c) : ti(c);
    prev_cased = cased(c);
  }
  return utf8_encode(u);
}

static std::string py_capitalize(std::string_view s) {  // str.capitalize() (3.8+: title-case first)
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? ti(u[i]) : lo(u[i]);
  return utf8_encode(u);
}

static std::string arg_str(const CallArgs& a, size_t i, const char* name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v) fail(std::string(method) + "() missing required argument '" + name + "'");
  if (!v->is_string()) fail(std::string(method) + "() argument must be str, not " + type_name(*v));
  return v->str();
}

static Value split_impl(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  ValueList out;
  std::u32string u = utf8_decode(s);
  if (!sep || sep->is_none()) {
    std::vector<std::u32string> parts;
    if (!from_right) {
      size_t i = 0, n = u.size();
      while (true) {
        while (i < n && py_isspace(u[i])) ++i;
        if (i == n) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.push_back(u.substr(i));
          break;
        }
        size_t j = i;
        while (j < n && !py_isspace(u[j])) ++j;
        parts.push_back(u.substr(i, j - i));
        i = j;
      }
    } else {
      size_t e = u.size();
      while (true) {
        while (e > 0 && py_isspace(u[e - 1])) --e;
        if (e == 0) break;
        if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
          parts.insert(parts.begin(), u.substr(0, e));
          break;
        }
        size_t b = e;
        while (b > 0 && !py_isspace(u[b - 1])) --b;
        parts.insert(parts.begin(), u.substr(b, e - b));
        e = b;
      }
    }
    for (auto& p : parts) out.emplace_back(utf8_encode(p));
    return Value::list(std::move(out));
  }
  if (!sep->is_string()) fail("must be str or None, not " + type_name(*sep));
  const std::string& d = sep->str();
  if (d.empty()) fail("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      size_t j = s.find(d, i);
      if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
        parts.push_back(s.substr(i));
        break;
      }
      parts.push_back(s.substr(i, j - i));
      i = j + d.size();
    }
  } else {
    size_t e = s.size();
    while (true) {
      size_t j = e >= d.size() ? s.rfind(d, e - d.size()) : std::string::npos;
      if (j == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
        parts.insert(parts.begin(), s.substr(0, e));
        break;
      }
      parts.insert(parts.begin(), s.substr(j + d.size(), e - j - d.size()));
      e = j;
    }
  }
  for (auto& p : parts) out.emplace_back(p);
  return Value::list(std::move(out));
}

static bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

static Value splitlines(const std::string& s, bool keepends) {
  std::u32string u = utf8_decode(s);
  ValueList out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    while (j < u.size() && !is_line_break(u[j])) ++j;
    size_t e = j;
    if (j < u.size()) e = (u[j] == '\r' && j + 1 < u.size() && u[j + 1] == '\n') ? j + 2 : j + 1;
    out.emplace_back(utf8_encode(u.substr(i, (keepends ? e : j) - i)));
    i = e;
  }
  return Value::list(std::move(out));
}

static std::string replace_impl(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      if (i < u.size()) out += utf8_encode(u.substr(i, 1));
    }
    return out;
  }
  size_t i = 0;
  int64_t done = 0;
  while (true) {
    size_t j = s.find(old, i);
    if (j == std::string::npos || (count >= 0 && done >= count)) break;
    out += s.substr(i, j - i) + rep;
    i = j + old.size();
    ++done;
  }
  return out + s.substr(i);
}

// str.format without format specs: "{}", "{0}", "{name}", "{{", "}}", conversions !s / !r.
static std::string str_format(const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}' ) {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      else fail("Single '}' encountered in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t j = f.find('}', i);
    if (j == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, j - i - 1);
    char conv = 's';
    if (size_t b = field.find('!'); b != std::string::npos) {
      conv = b + 1 < field.size() ? field[b + 1] : 's';
      field.resize(b);
    }
    if (field.find(':') != std::string::npos) fail("format specs in str.format are not supported");
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_idx < a.pos.size() ? &a.pos[auto_idx] : nullptr;
      ++auto_idx;
    } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      size_t k = 0;
      auto r = std::from_chars(field.data(), field.data() + field.size(), k);
      v = r.ec == std::errc() && k < a.pos.size() ? &a.pos[k] : nullptr;
    } else {
      for (const auto& [k, val] : a.kw)
        if (k == field) v = &val;
    }
    if (!v) fail("Replacement index out of range for positional args tuple");
    out += conv == 'r' ? repr(*v) : to_str(*v);
    i = j;
  }
  return out;
}

static const std::set<std::string> kStrMethods = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "swapcase", "replace", "find", "rfind", "count", "format", "join", "isdigit",
    "isalpha", "isalnum", "isspace", "islower", "isupper", "isnumeric", "isdecimal", "removeprefix", "removesuffix"};
static const std::set<std::string> kDictMethods = {"items", "keys", "values", "get"};
static const std::set<std::string> kListMethods = {"index", "count"};

bool has_method(const Value& self, const std::string& name) {
  if (self.is_string()) return kStrMethods.count(name) > 0;
  if (self.is_dict()) return kDictMethods.count(name) > 0;
  if (self.is_list()) return kListMethods.count(name) > 0;
  return false;
}

static bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) fail("startswith/endswith first arg must be str or a tuple of str, not " + type_name(v));
    const std::string& a = v.str();
    if (a.size() > s.size()) return false;
    return prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0;
  };
  if (affix.is_list()) {
    for (const auto& v : affix.items())
      if (one(v)) return true;
    return false;
  }
  return one(affix);
}

template <class Pred>
static bool all_chars(const std::string& s, Pred p) {
  std::u32string u = utf8_decode(s);
  if (u.empty()) return false;
  for (char32_t c : u)
    if (!p(c)) return false;
  return true;
}

static Value str_method(const std::string& s, const std::string& m, const CallArgs& a) {
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    const Value* chars = a.get(0, "chars");
    if (chars && !chars->is_none()) {
      if (!chars->is_string()) fail(m + " arg must be None or str");
      std::u32string set = utf8_decode(chars->str());
      return Value(py_strip(s, &set, m != "rstrip", m != "lstrip"));
    }
    return Value(py_strip(s, nullptr, m != "rstrip", m != "lstrip"));
  }
  if (m == "split" || m == "rsplit") {
    const Value* ms = a.get(1, "maxsplit");
    return split_impl(s, a.get(0, "sep"), ms ? ms->as_int() : -1, m == "rsplit");
  }
  if (m == "splitlines") {
    const Value* k = a.get(0, "keepends");
    return splitlines(s, k && truthy(*k));
  }
  if (m == "startswith" || m == "endswith") {
    const Value* p = a.get(0, "prefix");
    if (!p) fail(m + "() takes at least 1 argument");
    return Value(affix_match(s, *p, m == "startswith"));
  }
  if (m == "upper") return Value(py_upper(s));
  if (m == "lower") return Value(py_lower(s));
  if (m == "title") return Value(py_title(s));
  if (m == "capitalize") return Value(py_capitalize(s));
  if (m == "swapcase")
    return Value(map_chars(s, [](char32_t c) { return cat(c) == UTF8PROC_CATEGORY_LU ? lo(c) : up(c); }));
  if (m == "replace") {
    const Value* cnt = a.get(2, "count");
    return Value(replace_impl(s, arg_str(a, 0, "old", "replace"), arg_str(a, 1, "new", "replace"),
                              cnt ? cnt->as_int() : -1));
  }
  if (m == "find" || m == "rfind") {
    std::string sub = arg_str(a, 0, "sub", m.c_str());
    size_t p = m == "find" ? s.find(sub) : s.rfind(sub);
    return Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, p))));
  }
  if (m == "count") {
    std::string sub = arg_str(a, 0, "sub", "count");
    if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (m == "format") return Value(str_format(s, a));
  if (m == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const auto& v : iterate(*it)) {
      if (!v.is_string()) fail("sequence item: expected str instance, " + type_name(v) + " found");
      if (!first) out += s;
      first = false;
      out += v.str();
    }
    return Value(out);
  }
  if (m == "isdigit" || m == "isdecimal") return Value(all_chars(s, is_digit));
  if (m == "isnumeric") return Value(all_chars(s, is_numeric));
  if (m == "isalpha") return Value(all_chars(s, is_alpha));
  if (m == "isalnum") return Value(all_chars(s, [](char32_t c) { return is_alpha(c) || is_numeric(c); }));
  if (m == "isspace") return Value(all_chars(s, py_isspace));
  if (m == "islower" || m == "isupper") {
    std::u32string u = utf8_decode(s);
    bool any = false;
    for (char32_t c : u) {
      if (!cased(c)) continue;
      any = true;
      bool is_up = cat(c) != UTF8PROC_CATEGORY_LL;
      if ((m == "islower") == is_up) return Value(false);
    }
    return Value(any);
  }
  if (m == "removeprefix" || m == "removesuffix") {
    std::string x = arg_str(a, 0, "prefix", m.c_str());
    if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) return Value(s.substr(x.size()));
    if (m == "removesuffix" && !x.empty() && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  fail("'str' object has no attribute '" + m + "'");
}

Value call_method(const Value& self, const std::string& m, const CallArgs& a) {
  if (self.is_string()) return str_method(self.str(), m, a);
  if (self.is_dict()) {
    if (m == "get") {
      const Value* k = a.get(0, "key");
      if (!k) fail("get expected at least 1 argument, got 0");
      if (k->is_string())
        if (const Value* v = self.find(k->str())) return *v;
      const Value* d = a.get(1, "default");
      return d ? *d : Value::none();
    }
    ValueList out;
    for (const auto& [k, v] : self.entries()) {
      if (m == "keys") out.emplace_back(k);
      else if (m == "values") out.push_back(v);
      else out.push_back(Value::list({Value(k), v}, true));
    }
    return Value::list(std::move(out));
  }
  if (self.is_list()) {
    const Value* x = a.get(0, "value");
    if (!x) fail(m + "() takes exactly one argument");
    int64_t n = 0, idx = 0;
    for (const auto& v : self.items()) {
      if (py_eq(v, *x)) {
        if (m == "index") return Value(idx);
        ++n;
      }
      ++idx;
    }
    if (m == "index") fail(repr(*x) + " is not in list");
    return Value(n);
  }
  fail("'" + type_name(self) + "' object has no attribute '" + m + "'");
}

// snprintf into a string of the needed size (widths up to 99999, see percent_format).
template <class T>
std::string cformat(const char* spec, T x) {
  int n = std::snprintf(nullptr, 0, spec, x);
  if (n < 0) fail(std::string("bad format '") + spec + "'");
  std::string out(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(out.data(), out.size(), spec, x);
  out.resize(static_cast<size_t>(n));
  return out;
}

// printf-style formatting (Python's str % args).
std::string percent_format(const std::string& fmt, const ValueList& args) {
  std::string out;
  size_t ai = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    std::string flags;
    while (j < fmt.size() && std::string_view("-+ 0#").find(fmt[j]) != std::string_view::npos) flags += fmt[j++];
    std::string width, prec;
    while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) width += fmt[j++];
    bool has_prec = j < fmt.size() && fmt[j] == '.';
    if (has_prec) {
      ++j;
      while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) prec += fmt[j++];
    }
    // Width and precision up to 99999 (snprintf's int fields; a bigger one is a runaway template).
    if (width.size() > 5 || prec.size() > 5) fail("format width or precision too large (more than 99999)");
    if (j >= fmt.size()) fail("incomplete format");
    char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (ai >= args.size()) fail("not enough arguments for format string");
    const Value& v = args[ai++];
    std::string spec = std::string("%").append(flags).append(width);
    if (has_prec) spec.append(".").append(prec.empty() ? "0" : prec);
    if (conv == 's' || conv == 'r') {
      std::u32string u = utf8_decode(conv == 's' ? to_str(v) : repr(v));
      if (has_prec) u = u.substr(0, std::stoul(prec.empty() ? "0" : prec));
      size_t w = width.empty() ? 0 : std::stoul(width);
      std::string body = utf8_encode(u);
      std::string pad(w > u.size() ? w - u.size() : 0, ' ');
      out += flags.find('-') != std::string::npos ? body + pad : pad + body;
    } else if (std::string_view("diouxXc").find(conv) != std::string_view::npos) {
      if (!v.is_number()) fail("%" + std::string(1, conv) + " format: a real number is required, not " + type_name(v));
      if (v.is_float() && !(std::fabs(v.as_double()) < 9.2e18)) fail("cannot convert float " + to_str(v) + " to integer");
      long long x = v.is_float() ? static_cast<long long>(v.as_double()) : static_cast<long long>(v.as_int());
      char c = conv == 'i' || conv == 'u' ? 'd' : conv;
      if (conv == 'c') {
        if (x < 0 || x > 0x10FFFF) fail("%c arg not in range(0x110000)");
        out += utf8_encode(std::u32string(1, static_cast<char32_t>(x)));
      } else {
        out += cformat((spec + "ll" + c).c_str(), x);
      }
    } else if (std::string_view("eEfFgG").find(conv) != std::string_view::npos) {
      if (!v.is_number()) fail("must be real number, not " + type_name(v));
      out += cformat((spec + conv).c_str(), v.as_double());
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (ai < args.size()) fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace wgllm::jinja
