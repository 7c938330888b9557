// Python-compatible printing, comparison and JSON dumping of jinja values.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <utf8proc.h>

namespace wgllm::jinja {

void fail(const std::string& message) { throw RenderError(message); }

const Value* CallArgs::get(size_t i, std::string_view name) const {
  if (i < pos.size()) return &pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.t_ = Type::None;
  return v;
}
Value Value::list(ValueList items, bool tuple) {
  Value v;
  v.t_ = Type::List;
  v.tuple_ = tuple;
  v.list_ = std::make_shared<ValueList>(std::move(items));
  return v;
}
Value Value::dict(ValueDict items) {
  Value v;
  v.t_ = Type::Dict;
  v.dict_ = std::make_shared<ValueDict>(std::move(items));
  return v;
}
Value Value::ns(ValueDict attrs) {
  Value v = dict(std::move(attrs));
  v.t_ = Type::Namespace;
  return v;
}
Value Value::function(std::string name, Function fn) {
  Value v;
  v.t_ = Type::Function;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

int64_t Value::as_int() const {
  if (t_ == Type::Int) return i_;
  if (t_ == Type::Bool) return b_ ? 1 : 0;
  fail("'" + type_name(*this) + "' object cannot be interpreted as an integer");
}

double Value::as_double() const {
  switch (t_) {
    case Type::Float: return f_;
    case Type::Int: return static_cast<double>(i_);
    case Type::Bool: return b_ ? 1.0 : 0.0;
    default: fail("must be real number, not " + type_name(*this));
  }
}

const Value* Value::find(std::string_view key) const {
  if (!dict_) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.as_bool();
    case Type::Int: return v.as_int() != 0;
    case Type::Float: return v.as_double() != 0.0;
    case Type::String: return !v.str().empty();
    case Type::List: return !v.items().empty();
    case Type::Dict: return !v.entries().empty();
    default: return true;
  }
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List: return v.is_tuple() ? "tuple" : "list";
    case Type::Dict: return "dict";
    case Type::Namespace: return "Namespace";
    case Type::Function: return "function";
  }
  return "object";
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
#if defined(__EMSCRIPTEN__)
  // Emscripten 3.1.6's libc++ has no floating-point to_chars: the shortest %e form that
  // round-trips is the same digit string as to_chars' shortest representation.
  for (int prec = 0; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*e", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s(buf);
#else
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
#endif
  std::string out;
  if (s[0] == '-') {
    out = "-";
    s.erase(0, 1);
  }
  size_t e = s.find('e');
  int exp = std::stoi(s.substr(e + 1));
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (s[i] != '.') digits += s[i];
  int decpt = exp + 1;  // value = 0.DIGITS * 10^decpt
  int nd = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {  // CPython's float_repr_style 'short' rule
    if (decpt <= 0) out += "0." + std::string(-decpt, '0') + digits;
    else if (decpt >= nd) out += digits + std::string(decpt - nd, '0') + ".0";
    else out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  } else {
    out += digits.substr(0, 1);
    if (nd > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return out;
}

// ---- UTF-8
std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t cp = 0;
    auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                              static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) {
      cp = 0xFFFD;
      n = 1;
    }
    out.push_back(static_cast<char32_t>(cp));
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    utf8proc_uint8_t buf[4];
    auto n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
  }
  return out;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool py_isspace(char32_t c) {
  switch (c) {
    case ' ': case '\t': case '\n': case '\v': case '\f': case '\r':
    case 0x1c: case 0x1d: case 0x1e: case 0x1f: case 0x85: case 0xa0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202f: case 0x205f: case 0x3000:
      return true;
    default: return c >= 0x2000 && c <= 0x200a;
  }
}

std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  auto strip_me = [&](char32_t c) {
    return chars ? chars->find(c) != std::u32string::npos : py_isspace(c);
  };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_me(u[b])) ++b;
  if (right)
    while (e > b && strip_me(u[e - 1])) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

// Python's str.isprintable() per code point: not Cc/Cf/Cs/Co/Cn/Zl/Zp, and Zs only for ' '.
static bool py_printable(char32_t c) {
  if (c == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
      return false;
    default: return true;
  }
}

std::string string_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : utf8_decode(s)) {
    char buf[16];
    if (c == static_cast<char32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x7f && c >= 0x20) {
      out += static_cast<char>(c);
    } else if (py_printable(c)) {
      out += utf8_encode(std::u32string(1, c));
    } else {
      if (c <= 0xff) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c <= 0xffff) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out += q;
  return out;
}

std::string repr(const Value& v) {
  switch (v.type()) {
    case Type::String: return string_repr(v.str());
    case Type::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        out += repr(v.items()[i]);
      }
      if (v.is_tuple() && v.items().size() == 1) out += ",";
      return out + (v.is_tuple() ? ")" : "]");
    }
    case Type::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.entries()) {
        if (!first) out += ", ";
        first = false;
        out += string_repr(k) + ": " + repr(val);
      }
      return out + "}";
    }
    case Type::Undefined: return "Undefined";
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.as_bool() ? "True" : "False";
    case Type::Int: return std::to_string(v.as_int());
    case Type::Float: return float_repr(v.as_double());
    case Type::String: return v.str();
    case Type::List:
    case Type::Dict: return repr(v);
    case Type::Namespace: {
      Value d = Value::dict(v.entries());
      return "<Namespace " + repr(d) + ">";
    }
    case Type::Function: return "<function " + v.str() + ">";
  }
  return "";
}

bool py_eq(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String: return a.str() == b.str();
    case Type::List: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!py_eq(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Type::Dict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* o = b.find(k);
        if (!o || !py_eq(v, *o)) return false;
      }
      return true;
    }
    default: return &a.entries() == &b.entries();
  }
}

int py_cmp(const Value& a, const Value& b, std::string_view op) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {  // UTF-8 byte order == code point order
    int c = a.str().compare(b.str());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!py_eq(x[i], y[i])) return py_cmp(x[i], y[i], op);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

template <class J>
static Value from_json_impl(const J& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      for (const auto& e : j) items.push_back(from_json_impl(e));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      ValueDict items;
      for (auto it = j.begin(); it != j.end(); ++it) items.emplace_back(it.key(), from_json_impl(it.value()));
      return Value::dict(std::move(items));
    }
    default: throw Error("chat template context: unsupported JSON value (binary/discarded)");
  }
}
Value from_json(const nlohmann::json& j) { return from_json_impl(j); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }

// json.dumps string encoding (py_encode_basestring / py_encode_basestring_ascii).
static void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  auto hex4 = [&](unsigned v) {
    char b[16];
    std::snprintf(b, sizeof b, "\\u%04x", v);
    out += b;
  };
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
      if (c > 0xffff) {
        unsigned v = static_cast<unsigned>(c) - 0x10000;
        hex4(0xd800 | (v >> 10));
        hex4(0xdc00 | (v & 0x3ff));
      } else {
        hex4(static_cast<unsigned>(c));
      }
    } else {
      out += utf8_encode(std::u32string(1, c));
    }
  }
  out += '"';
}

static void dumps(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.type()) {
    case Type::None: out += "null"; return;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Type::Int: out += std::to_string(v.as_int()); return;
    case Type::Float: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += float_repr(d);
      return;
    }
    case Type::String: json_string(out, v.str(), o.ensure_ascii); return;
    case Type::List: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += o.item_sep;
        if (o.indent) newline(level + 1);
        dumps(out, v.items()[i], o, level + 1);
      }
      if (o.indent) newline(level);
      out += ']';
      return;
    }
    case Type::Dict: {
      if (v.entries().empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      for (const auto& e : v.entries()) order.push_back(&e);
      if (o.sort_keys)
        std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += o.item_sep;
        if (o.indent) newline(level + 1);
        json_string(out, order[i]->first, o.ensure_ascii);
        out += o.key_sep;
        dumps(out, order[i]->second, o, level + 1);
      }
      if (o.indent) newline(level);
      out += '}';
      return;
    }
    default: fail("Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& opt) {
  std::string out;
  dumps(out, v, opt, 0);
  return out;
}

}  // namespace wgllm::jinja
