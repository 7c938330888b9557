// Filters of jinja2/filters.py (3.1) used by chat templates, with jinja2's argument names and
// defaults, plus transformers' `tojson` override:
//   tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False) = json.dumps(...)
// (no HTML escaping, unlike jinja2's own tojson).
// Supported: abs attr capitalize center count d default dictsort e escape first float format indent int
// items join last length list lower map max min reject rejectattr replace reverse round safe select
// selectattr sort string sum title tojson trim unique upper wordcount.
// Difference: jinja2's map/select/reject/selectattr/rejectattr/unique/reverse return generators or
// iterators (printing one directly shows "<generator object ...>"); here they return lists.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_builtins.h"

namespace wgllm::jinja {

// Largest padding a filter adds (indent width, tojson indent, center): a template asking for more is
// a runaway, not a chat format.
constexpr int64_t kMaxPad = 1 << 16;
namespace {

const Value* opt_arg(const CallArgs& a, size_t i, const char* name) { return a.get(i, name); }

bool bool_arg(const CallArgs& a, size_t i, const char* name, bool def) {
  const Value* v = a.get(i, name);
  return v ? truthy(*v) : def;
}

// jinja2 make_attrgetter: "a.b" walks attributes/items; integer parts index.
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('.', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    int64_t index = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc())
      return Value::undefined("index " + part + " is out of range");  // Python: IndexError -> Undefined
    cur = digits ? get_item(cur, Value(index)) : get_item(cur, Value(part));
    i = j + 1;
  }
  return cur;
}

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

// Python's float(str): surrounding whitespace allowed, underscores between digits, inf/nan.
bool parse_float(const std::string& s, double& out) {
  std::string t = py_strip(s, nullptr, true, true), clean;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
        std::isdigit(static_cast<unsigned char>(t[i + 1])))
      continue;
    clean += t[i];
  }
  if (clean.empty() || clean.find_first_of("xXpP") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

bool parse_int(const std::string& s, int base, int64_t& out) {
  std::string t = py_strip(s, nullptr, true, true), clean;
  for (size_t i = 0; i < t.size(); ++i)
    if (t[i] != '_' || i == 0) clean += t[i];
  if (clean.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(clean.c_str(), &end, base);
  return end == clean.c_str() + clean.size() && errno == 0 && !std::isspace(static_cast<unsigned char>(clean[0]));
}

// Python round(x, ndigits): correctly rounded, ties to even (glibc printf rounds the exact binary value).
double py_round(double x, int64_t nd) {
  if (!std::isfinite(x)) return x;
  char buf[512];
  if (nd >= 0) {
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(nd, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double p = std::pow(10.0, static_cast<double>(-nd));
  return std::nearbyint(x / p) * p;
}

Value do_tojson(const Value& v, const CallArgs& a) {
  JsonDumpOptions o;
  o.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
  if (const Value* ind = opt_arg(a, 1, "indent"); ind && !ind->is_none()) {
    if (ind->is_string()) o.indent = ind->str();
    else o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, kMaxPad)), ' ');
    o.item_sep = ",";
  }
  if (const Value* sep = opt_arg(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->items().size() != 2) fail("tojson separators must be a (item, key) pair");
    o.item_sep = to_str(sep->items()[0]);
    o.key_sep = to_str(sep->items()[1]);
  }
  o.sort_keys = bool_arg(a, 3, "sort_keys", false);
  return Value(json_dumps(v, o));
}

Value do_indent(const Value& v, const CallArgs& a) {
  const Value* w = opt_arg(a, 0, "width");
  std::string ind = w ? (w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w->as_int(), 0, kMaxPad)), ' ')) : "    ";
  bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
  Value lines_v = call_method(Value(to_str(v) + "\n"), "splitlines", CallArgs{});
  const ValueList& lines = lines_v.items();
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i].str();
  } else {
    rv = lines.empty() ? "" : lines[0].str();
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].str().empty() ? "" : ind) + lines[i].str();
  }
  return Value(first ? ind + rv : rv);
}

Value do_title(const std::string& s) {  // jinja2: split on ([-\s({\[<]+), item[0].upper() + item[1:].lower()
  std::u32string u = utf8_decode(s);
  bool start = true;
  for (auto& c : u) {
    bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    if (sep) {
      start = true;
      continue;
    }
    std::string one = utf8_encode(std::u32string(1, c));
    std::u32string m = utf8_decode(start ? py_upper(one) : py_lower(one));
    if (m.size() == 1) c = m[0];
    start = false;
  }
  return Value(utf8_encode(u));
}

ValueList select_impl(const Value& seq, const CallArgs& a, bool attr, bool keep) {
  ValueList out;
  size_t first = 0;
  std::string attribute;
  if (attr) {
    const Value* at = opt_arg(a, 0, "attribute");
    if (!at) fail("selectattr/rejectattr: missing attribute");
    attribute = to_str(*at);
    first = 1;
  }
  std::string test;
  CallArgs targs;
  if (a.pos.size() > first) {
    test = to_str(a.pos[first]);
    targs.pos.assign(a.pos.begin() + static_cast<long>(first) + 1, a.pos.end());
  }
  for (const auto& item : iterate(seq)) {
    Value x = attr ? attr_path(item, attribute) : item;
    bool ok = test.empty() ? truthy(x) : apply_test(test, x, targs);
    if (ok == keep) out.push_back(item);
  }
  return out;
}

Value do_map(const Value& seq, const CallArgs& a) {
  ValueList out;
  if (const Value* at = a.get(99, "attribute")) {
    const Value* def = a.get(99, "default");
    for (const auto& item : iterate(seq)) {
      Value x = attr_path(item, to_str(*at));
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return Value::list(std::move(out));
  }
  if (a.pos.empty()) return Value::list(iterate(seq));
  std::string fname = to_str(a.pos[0]);
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (const auto& item : iterate(seq)) out.push_back(apply_filter(fname, item, fargs));
  return Value::list(std::move(out));
}

ValueList sorted(ValueList items, bool case_sensitive, const std::string& attribute, bool reverse) {
  auto key = [&](const Value& v) { return sort_key(attribute.empty() ? v : attr_path(v, attribute), case_sensitive); };
  // jinja2 sorts by a one-element key list, so equal keys (even two Undefined) never reach '<'.
  auto less = [](const Value& a, const Value& b) { return !py_eq(a, b) && py_cmp(a, b, "<") < 0; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return reverse ? less(key(y), key(x)) : less(key(x), key(y));
  });
  return items;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& v, const CallArgs& a) {
  auto attr_opt = [&](size_t i) {
    const Value* at = a.get(i, "attribute");
    return at && !at->is_none() ? to_str(*at) : std::string();
  };
  if (name == "default" || name == "d") {
    const Value* def = a.get(0, "default_value");
    if (v.is_undefined() || (bool_arg(a, 1, "boolean", false) && !truthy(v))) return def ? *def : Value("");
    return v;
  }
  if (name == "tojson") return do_tojson(v, a);
  if (name == "safe") return v;
  if (name == "string") return Value(to_str(v));
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    if (chars && !chars->is_none()) {
      std::u32string set = utf8_decode(to_str(*chars));
      return Value(py_strip(to_str(v), &set, true, true));
    }
    return Value(py_strip(to_str(v), nullptr, true, true));
  }
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(py_len(v)));
  if (name == "upper") return Value(py_upper(to_str(v)));
  if (name == "lower") return Value(py_lower(to_str(v)));
  if (name == "capitalize") return call_method(Value(to_str(v)), "capitalize", CallArgs{});
  if (name == "title") return do_title(to_str(v));
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(to_str(v)));
  if (name == "replace") {
    if (!a.get(0, "old") || !a.get(1, "new")) fail("replace filter needs old and new");
    CallArgs ra;
    ra.pos = {Value(to_str(*a.get(0, "old"))), Value(to_str(*a.get(1, "new")))};
    if (const Value* c = a.get(2, "count"); c && !c->is_none()) ra.pos.push_back(*c);
    return call_method(Value(to_str(v)), "replace", ra);
  }
  if (name == "join") {
    const Value* d = a.get(0, "d");
    std::string sep = d ? to_str(*d) : "", attribute = attr_opt(1), out;
    bool first = true;
    for (const auto& item : iterate(v)) {
      if (!first) out += sep;
      first = false;
      out += to_str(attribute.empty() ? item : attr_path(item, attribute));
    }
    return Value(out);
  }
  if (name == "first") {
    ValueList items = iterate(v);
    return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
  }
  if (name == "last") {
    ValueList items = iterate(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "list") return Value::list(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      std::u32string u = utf8_decode(v.str());
      std::reverse(u.begin(), u.end());
      return Value(utf8_encode(u));
    }
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::list({});
    if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
    return call_method(v, "items", CallArgs{});
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort expects a mapping");
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    int pos = by && to_str(*by) == "value" ? 1 : 0;
    bool rev = bool_arg(a, 2, "reverse", false);
    ValueList items = call_method(v, "items", CallArgs{}).items();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const Value kx = sort_key(x.items()[pos], cs), ky = sort_key(y.items()[pos], cs);
      return rev ? py_cmp(ky, kx, "<") < 0 : py_cmp(kx, ky, "<") < 0;
    });
    return Value::list(std::move(items));
  }
  if (name == "sort")
    return Value::list(sorted(iterate(v), bool_arg(a, 1, "case_sensitive", false), attr_opt(2), bool_arg(a, 0, "reverse", false)));
  if (name == "unique") {
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    std::string attribute = attr_opt(1);
    ValueList out, seen;
    for (const auto& item : iterate(v)) {
      Value k = sort_key(attribute.empty() ? item : attr_path(item, attribute), cs);
      bool dup = std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return py_eq(s, k); });
      if (!dup) {
        seen.push_back(k);
        out.push_back(item);
      }
    }
    return Value::list(std::move(out));
  }
  if (name == "min" || name == "max") {
    ValueList items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    std::string attribute = attr_opt(1);
    auto key = [&](const Value& x) { return sort_key(attribute.empty() ? x : attr_path(x, attribute), cs); };
    const Value* best = &items[0];
    for (const auto& x : items) {
      int c = py_cmp(key(x), key(*best), "<");
      if (name == "min" ? c < 0 : c > 0) best = &x;
    }
    return *best;
  }
  if (name == "sum") {
    std::string attribute = attr_opt(0);
    const Value* start = a.get(1, "start");
    Value acc = start ? *start : Value(0);
    for (const auto& x : iterate(v)) {
      Value y = attribute.empty() ? x : attr_path(x, attribute);
      if (!acc.is_number() || !y.is_number()) fail("unsupported operand type(s) for +: '" + type_name(acc) + "' and '" + type_name(y) + "'");
      int64_t s;
      if (!acc.is_float() && !y.is_float() && __builtin_add_overflow(acc.as_int(), y.as_int(), &s))
        fail("integer overflow in sum (integers are 64-bit here)");
      acc = (acc.is_float() || y.is_float()) ? Value(acc.as_double() + y.as_double()) : Value(s);
    }
    return acc;
  }
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) {
      if (v.as_int() == INT64_MIN) fail("integer overflow in abs (integers are 64-bit here)");
      return Value(static_cast<int64_t>(std::llabs(v.as_int())));
    }
    fail("bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    int64_t prec = p ? p->as_int() : 0;
    const Value* m = a.get(1, "method");
    std::string method = m ? to_str(*m) : "common";
    if (method == "common") {
      if (!v.is_float()) {  // Python round(int, n) keeps an int; n < 0 rounds half to even
        if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
        int64_t x = v.as_int();
        if (prec >= 0) return Value(x);
        int64_t p10 = 1;
        for (int64_t i = 0; i < -prec && p10 <= INT64_MAX / 10; ++i) p10 *= 10;
        int64_t q = x / p10, r = x % p10;
        if (r < 0) {
          r += p10;
          --q;
        }
        if (2 * r > p10 || (2 * r == p10 && (q % 2 != 0))) ++q;
        if (q > INT64_MAX / p10 || q < INT64_MIN / p10) fail("integer overflow in round (integers are 64-bit here)");
        return Value(q * p10);
      }
      return Value(py_round(v.as_double(), prec));
    }
    if (method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
    double scale = std::pow(10.0, static_cast<double>(prec));
    double x = v.as_double() * scale;
    return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (name == "int") {
    const Value* d = a.get(0, "default");
    const Value* b = a.get(1, "base");
    Value def = d ? *d : Value(0);
    if (v.is_undefined()) undefined_error(v);
    if (v.is_bool() || v.is_int()) return Value(v.as_int());
    // A float outside int64 (Python would give a big int) or inf/nan gives the default.
    auto to_int = [&def](double f) { return std::fabs(f) < 9.2e18 ? Value(static_cast<int64_t>(f)) : def; };
    if (v.is_float()) return to_int(v.as_double());
    if (v.is_string()) {
      int64_t i;
      if (parse_int(v.str(), b ? static_cast<int>(b->as_int()) : 10, i)) return Value(i);
      double f;
      if (parse_float(v.str(), f)) return to_int(f);
    }
    return def;
  }
  if (name == "float") {
    const Value* d = a.get(0, "default");
    if (v.is_undefined()) undefined_error(v);
    if (v.is_number()) return Value(v.as_double());
    double f;
    if (v.is_string() && parse_float(v.str(), f)) return Value(f);
    return d ? *d : Value(0.0);
  }
  if (name == "format") {
    if (!a.kw.empty()) fail("format filter: keyword arguments are not supported");
    return Value(percent_format(to_str(v), a.pos));
  }
  if (name == "indent") return do_indent(v, a);
  if (name == "wordcount") {  // len(re.findall(r"\w+", s))
    int64_t n = 0;
    bool in_word = false;
    for (char32_t c : utf8_decode(to_str(v))) {
      bool w = c == '_' || call_method(Value(utf8_encode(std::u32string(1, c))), "isalnum", CallArgs{}).as_bool();
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "center") {  // str.center(width): extra padding goes right when odd, like CPython
    const Value* w = a.get(0, "width");
    std::u32string u = utf8_decode(to_str(v));
    int64_t width = w ? w->as_int() : 80, n = static_cast<int64_t>(u.size());
    if (width <= n) return Value(to_str(v));
    if (width - n > kMaxPad) fail("center width too large (padding over " + std::to_string(kMaxPad) + ")");
    int64_t marg = width - n, left = marg / 2 + (marg & width & 1);
    return Value(std::string(static_cast<size_t>(left), ' ') + to_str(v) +
                 std::string(static_cast<size_t>(marg - left), ' '));
  }
  if (name == "attr") {
    const Value* n = a.get(0, "name");
    if (!n) fail("attr filter needs a name");
    return get_attr(v, to_str(*n));
  }
  if (name == "map") return do_map(v, a);
  if (name == "select" || name == "reject") return Value::list(select_impl(v, a, false, name == "select"));
  if (name == "selectattr" || name == "rejectattr")
    return Value::list(select_impl(v, a, true, name == "selectattr"));
  fail("no filter named '" + name + "'");
}

}  // namespace wgllm::jinja
