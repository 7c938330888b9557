// Built-in behaviour of the Jinja2 subset: attribute/item access (jinja2 Environment.getattr /
// getitem), Python iteration and len(), filters (jinja2/filters.py plus transformers' tojson),
// tests (jinja2/tests.py), str/dict/list methods allowed by ImmutableSandboxedEnvironment, and the
// globals transformers adds (raise_exception, strftime_now) next to jinja2's (range, namespace, dict).
#pragma once
#include <string>
#include <string_view>

#include "chat/jinja_value.h"

namespace wgllm::jinja {

/// `obj.name`: methods first, then dict keys / namespace attributes (jinja2 getattr order).
/// Missing -> Undefined with jinja2's hint; attribute of Undefined -> UndefinedError.
Value get_attr(const Value& obj, const std::string& name);
/// `obj[key]`: item first, then attribute for string keys (jinja2 getitem order).
Value get_item(const Value& obj, const Value& key);
/// Python slicing obj[start:stop:step] of lists/tuples and strings (null parts are Undefined).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
/// Python iter(): list items, dict keys, string code points; Undefined iterates as empty.
ValueList iterate(const Value& v);
/// Python len(); Undefined has length 0.
size_t py_len(const Value& v);
/// Python `item in container`.
bool contains(const Value& container, const Value& item);
/// Throws the UndefinedError jinja2 raises when an Undefined is used in an operation.
[[noreturn]] void undefined_error(const Value& u);

Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);

bool has_method(const Value& self, const std::string& name);
Value call_method(const Value& self, const std::string& name, const CallArgs& args);

/// Globals visible to every template.
ValueDict make_globals();

/// Python printf-style `fmt % args` (args: a tuple/list for several values, else one value).
std::string percent_format(const std::string& fmt, const ValueList& args);
/// Simple (1:1) Unicode case mapping; Python's upper()/lower() also do rare 1:n mappings (ß -> SS).
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace wgllm::jinja
