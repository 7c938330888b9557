// Runtime values of the Jinja2-subset interpreter (see jinja.h for why the engine has its own).
//
// A Value models the Python objects a chat template sees when transformers renders it:
// None, bool, int, float, str, list/tuple, dict (insertion-ordered, like a Python dict built by
// json.load), jinja2's namespace(), callables (globals, macros, bound methods) and jinja2's default
// `Undefined`.  Lists, dicts and namespaces have reference semantics (shared_ptr) like Python objects;
// the sandbox transformers uses (ImmutableSandboxedEnvironment) forbids mutating lists and dicts, so
// only namespaces are ever written to.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace wgllm::jinja {

/// Error raised while rendering (TypeError, UndefinedError, ... in jinja2). `located` is set once the
/// evaluator has prefixed the template line.
class RenderError : public Error {
 public:
  explicit RenderError(const std::string& what, bool located = false) : Error(what), located(located) {}
  bool located;
};

/// Thrown by the template global raise_exception(msg): the message is passed through verbatim.
class TemplateRaise : public Error {
 public:
  explicit TemplateRaise(const std::string& what) : Error(what) {}
};

[[noreturn]] void fail(const std::string& message);

class Value;
using ValueList = std::vector<Value>;
using ValueDict = std::vector<std::pair<std::string, Value>>;  // insertion-ordered

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  /// Positional argument `i`, else keyword `name`, else nullptr.
  const Value* get(size_t i, std::string_view name) const;
};
using Function = std::function<Value(const CallArgs&)>;

enum class Type { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function };

class Value {
 public:
  Value() = default;  // Undefined
  Value(bool b) : t_(Type::Bool), b_(b) {}
  Value(int v) : t_(Type::Int), i_(v) {}
  Value(int64_t v) : t_(Type::Int), i_(v) {}
  Value(double v) : t_(Type::Float), f_(v) {}
  Value(std::string s) : t_(Type::String), s_(std::move(s)) {}
  Value(const char* s) : t_(Type::String), s_(s) {}

  /// Undefined carrying jinja2's hint, e.g. "'dict object' has no attribute 'x'".
  static Value undefined(std::string hint);
  static Value none();
  static Value list(ValueList items, bool tuple = false);
  static Value dict(ValueDict items);
  static Value ns(ValueDict attrs);
  static Value function(std::string name, Function fn);

  Type type() const { return t_; }
  bool is_undefined() const { return t_ == Type::Undefined; }
  bool is_none() const { return t_ == Type::None; }
  bool is_bool() const { return t_ == Type::Bool; }
  bool is_int() const { return t_ == Type::Int; }
  bool is_float() const { return t_ == Type::Float; }
  /// Python's numbers.Number: bool counts, as in jinja2's `is number` test.
  bool is_number() const { return t_ == Type::Int || t_ == Type::Float || t_ == Type::Bool; }
  bool is_string() const { return t_ == Type::String; }
  bool is_list() const { return t_ == Type::List; }
  bool is_tuple() const { return t_ == Type::List && tuple_; }
  bool is_dict() const { return t_ == Type::Dict; }
  bool is_namespace() const { return t_ == Type::Namespace; }
  bool is_callable() const { return t_ == Type::Function; }

  bool as_bool() const { return b_; }
  /// int value; bools convert like Python (True == 1); anything else is a TypeError, as when
  /// Python needs an integer (`'str' object cannot be interpreted as an integer`).
  int64_t as_int() const;
  double as_double() const;
  const std::string& str() const { return s_; }   // string payload, or Undefined hint / function name
  const ValueList& items() const { return *list_; }
  const ValueDict& entries() const { return *dict_; }
  ValueDict& entries_mut() const { return *dict_; }
  const Function& fn() const { return *fn_; }
  /// Dict / namespace lookup; nullptr when absent.
  const Value* find(std::string_view key) const;

 private:
  Type t_ = Type::Undefined;
  bool b_ = false;
  bool tuple_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<Function> fn_;
};

bool truthy(const Value& v);
/// Python str(v); Undefined prints as "" (jinja2's default Undefined).
std::string to_str(const Value& v);
/// Python repr(v) (used for items of printed lists/dicts).
std::string repr(const Value& v);
/// Python's type name ("str", "dict", "NoneType") for error messages like jinja2's.
std::string type_name(const Value& v);
/// Python ==, including 1 == 1.0 == True.
bool py_eq(const Value& a, const Value& b);
/// Python ordering (<0, 0, >0) for numbers, strings and lists; throws TypeError-like errors otherwise.
int py_cmp(const Value& a, const Value& b, std::string_view op);
/// Python float repr: shortest round-trip digits, exponent form outside 1e-4 <= |x| < 1e16.
std::string float_repr(double d);
/// Python str.__repr__ quoting.
std::string string_repr(std::string_view s);

Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

/// Python json.dumps options, as exposed by transformers' tojson filter.
struct JsonDumpOptions {
  std::optional<std::string> indent;
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string json_dumps(const Value& v, const JsonDumpOptions& opt);

// ---- UTF-8 helpers: Python strings index by code point.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
size_t utf8_length(std::string_view s);
/// str.isspace() for one code point.
bool py_isspace(char32_t c);
/// str.strip/lstrip/rstrip: `chars` null strips Unicode whitespace, else any code point in *chars.
std::string py_strip(std::string_view s, const std::u32string* chars, bool left, bool right);

}  // namespace wgllm::jinja
