// Attribute/item access, iteration, tests and globals.
#include "chat/jinja_builtins.h"

#include <cmath>
#include <ctime>

namespace wgllm::jinja {

void undefined_error(const Value& u) { fail(u.str().empty() ? "undefined value" : u.str()); }

static std::string obj_desc(const Value& v) { return std::string("'").append(type_name(v)).append(" object'"); }

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (has_method(obj, name))
    return Value::function(name, [obj, name](const CallArgs& a) { return call_method(obj, name, a); });
  if (obj.is_dict() || obj.is_namespace())
    if (const Value* v = obj.find(name)) return *v;
  return Value::undefined(obj_desc(obj) + " has no attribute '" + name + "'");
}

static bool index_of(const Value& key, size_t size, size_t& out) {
  if (!(key.is_int() || key.is_bool())) return false;
  int64_t i = key.as_int();
  if (i < 0) i += static_cast<int64_t>(size);
  if (i < 0 || i >= static_cast<int64_t>(size)) return false;
  out = static_cast<size_t>(i);
  return true;
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    if (key.is_string())
      if (const Value* v = obj.find(key.str())) return *v;
  } else if (obj.is_list()) {
    size_t i;
    if (index_of(key, obj.items().size(), i)) return obj.items()[i];
    if (key.is_int()) return Value::undefined(obj_desc(obj) + " has no element " + std::to_string(key.as_int()));
  } else if (obj.is_string()) {
    std::u32string u = utf8_decode(obj.str());
    size_t i;
    if (index_of(key, u.size(), i)) return Value(utf8_encode(u.substr(i, 1)));
    if (key.is_int()) return Value::undefined(obj_desc(obj) + " has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined(obj_desc(obj) + " has no element " + repr(key));
}

// Python slice.indices() semantics.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) undefined_error(obj);
  auto opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(std::string("slice ") + what + " must be an integer or None");
    return v.as_int();
  };
  std::u32string u;
  int64_t n;
  if (obj.is_string()) {
    u = utf8_decode(obj.str());
    n = static_cast<int64_t>(u.size());
  } else if (obj.is_list()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    fail("'" + type_name(obj) + "' object is not subscriptable");
  }
  int64_t st = opt(step, "step").value_or(1);
  if (st == 0) fail("slice step cannot be zero");
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = clamp(opt(start, "start"), st < 0 ? n - 1 : 0);
  int64_t e = clamp(opt(stop, "stop"), st < 0 ? -1 : n);
  std::vector<size_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(static_cast<size_t>(i));
  if (obj.is_string()) {
    std::u32string r;
    for (size_t i : idx) r += u[i];
    return Value(utf8_encode(r));
  }
  ValueList items;
  for (size_t i : idx) items.push_back(obj.items()[i]);
  return Value::list(std::move(items), obj.is_tuple());
}

ValueList iterate(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return {};
    case Type::List: return v.items();
    case Type::Dict: {
      ValueList keys;
      for (const auto& [k, _] : v.entries()) keys.emplace_back(k);
      return keys;
    }
    case Type::String: {
      ValueList chars;
      for (char32_t c : utf8_decode(v.str())) chars.emplace_back(utf8_encode(std::u32string(1, c)));
      return chars;
    }
    default: fail("'" + type_name(v) + "' object is not iterable");
  }
}

size_t py_len(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return 0;
    case Type::String: return utf8_length(v.str());
    case Type::List: return v.items().size();
    case Type::Dict: return v.entries().size();
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::Undefined: return false;
    case Type::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Type::List:
      for (const auto& e : container.items())
        if (py_eq(e, item)) return true;
      return false;
    case Type::Dict: return item.is_string() && container.find(item.str()) != nullptr;
    default: fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

// ---- tests (jinja2/tests.py)
bool apply_test(const std::string& name, const Value& v, const CallArgs& a) {
  auto arg = [&](size_t i, const char* n) -> const Value& {
    const Value* p = a.get(i, n);
    if (!p) fail("test '" + name + "' is missing an argument");
    return *p;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  // Undefined defines __iter__, __len__ and __getitem__, so jinja2 counts it as iterable/sequence.
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!v.is_number() || v.is_float()) fail("test '" + name + "' expects an integer");
    int64_t m = v.as_int() % 2;
    return name == "odd" ? m != 0 : m == 0;
  }
  if (name == "divisibleby") {
    const Value& d = arg(0, "num");
    if (v.is_float() || d.is_float()) {
      if (d.as_double() == 0.0) fail("float modulo");
      return std::fmod(v.as_double(), d.as_double()) == 0.0;
    }
    if (d.as_int() == 0) fail("integer division or modulo by zero");
    if (d.as_int() == -1) return true;  // INT64_MIN % -1 overflows
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return py_eq(v, arg(0, "other"));
  if (name == "ne" || name == "!=") return !py_eq(v, arg(0, "other"));
  if (name == "lt" || name == "lessthan" || name == "<") return py_cmp(v, arg(0, "other"), "<") < 0;
  if (name == "le" || name == "<=") return py_cmp(v, arg(0, "other"), "<=") <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return py_cmp(v, arg(0, "other"), ">") > 0;
  if (name == "ge" || name == ">=") return py_cmp(v, arg(0, "other"), ">=") >= 0;
  if (name == "in") return contains(arg(0, "seq"), v);
  if (name == "lower") return v.is_string() && py_lower(v.str()) == v.str() && py_upper(v.str()) != v.str();
  if (name == "upper") return v.is_string() && py_upper(v.str()) == v.str() && py_lower(v.str()) != v.str();
  if (name == "sameas") {
    const Value& o = arg(0, "other");
    if (v.type() != o.type()) return false;
    if (v.is_none() || v.is_undefined()) return true;
    if (v.is_bool()) return v.as_bool() == o.as_bool();
    if (v.is_list()) return &v.items() == &o.items();
    if (v.is_dict() || v.is_namespace()) return &v.entries() == &o.entries();
    if (v.is_callable()) return &v.fn() == &o.fn();
    return py_eq(v, o);
  }
  fail("no test named '" + name + "'");
}

// ---- globals
static Value g_range(const CallArgs& a) {
  if (a.pos.empty() || a.pos.size() > 3) fail("range expected 1 to 3 arguments");
  for (const auto& v : a.pos)
    if (!v.is_int() && !v.is_bool()) fail("'" + type_name(v) + "' object cannot be interpreted as an integer");
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = a.pos[0].as_int();
  } else {
    start = a.pos[0].as_int();
    stop = a.pos[1].as_int();
    if (a.pos.size() == 3) step = a.pos[2].as_int();
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  ValueList out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (out.size() >= 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.emplace_back(i);
    if (__builtin_add_overflow(i, step, &i)) break;  // past INT64_MAX/MIN: past stop as well
  }
  return Value::list(std::move(out));
}

static ValueDict kw_dict(const CallArgs& a, const char* fname) {
  ValueDict d;
  if (!a.pos.empty()) {
    if (a.pos.size() > 1 || !a.pos[0].is_dict()) fail(std::string(fname) + "() expects at most one mapping argument");
    d = a.pos[0].entries();
  }
  for (const auto& [k, v] : a.kw) {
    bool replaced = false;
    for (auto& [key, old] : d)
      if (key == k) {
        old = v;
        replaced = true;
      }
    if (!replaced) d.emplace_back(k, v);
  }
  return d;
}

ValueDict make_globals() {
  ValueDict g;
  g.emplace_back("range", Value::function("range", g_range));
  g.emplace_back("namespace", Value::function("namespace", [](const CallArgs& a) {
                   return Value::ns(kw_dict(a, "namespace"));
                 }));
  g.emplace_back("dict", Value::function("dict", [](const CallArgs& a) { return Value::dict(kw_dict(a, "dict")); }));
  // transformers: raise_exception(message) raises jinja2.exceptions.TemplateError(message).
  g.emplace_back("raise_exception", Value::function("raise_exception", [](const CallArgs& a) -> Value {
                   const Value* m = a.get(0, "message");
                   throw TemplateRaise(m ? to_str(*m) : std::string());
                 }));
  // transformers: strftime_now(format) = datetime.now().strftime(format), local time.
  g.emplace_back("strftime_now", Value::function("strftime_now", [](const CallArgs& a) -> Value {
                   const Value* f = a.get(0, "format");
                   if (!f || !f->is_string()) fail("strftime_now() expects a format string");
                   std::time_t t = std::time(nullptr);
                   std::tm tm{};
                   localtime_r(&t, &tm);
                   char buf[512];
                   size_t n = std::strftime(buf, sizeof buf, f->str().c_str(), &tm);
                   return Value(std::string(buf, n));
                 }));
  return g;
}

}  // namespace wgllm::jinja
