// Evaluator: scopes, statements and Python operator semantics.
//
// Scoping follows jinja2: `for` bodies, macros and `with` get their own frame; `if` does not; a
// `for` body frame is fresh on every iteration (a `set` inside a loop is visible for the rest of that
// iteration only, which is why templates use namespace()). Template-level `set` writes the root frame.
#include <algorithm>
#include <cmath>

#include "chat/jinja.h"
#include "chat/jinja_builtins.h"

namespace wgllm::jinja {
namespace {

struct Frame {
  ValueDict vars;
  std::shared_ptr<Frame> parent;

  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get())
      for (const auto& [k, v] : f->vars)
        if (k == name) return &v;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars)
      if (k == name) {
        old = std::move(v);
        return;
      }
    vars.emplace_back(name, std::move(v));
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

// Resource limits (see jinja.h): a template is untrusted input (it ships inside a model file), so a
// render must end, in bounded time, memory and stack, whatever the template does.
constexpr int kMaxDepth = 256;  // nested calls (macros, caller(), builtins), like Python's recursion limit
constexpr int kMaxNesting = kMaxRenderNesting;  // nested evaluation frames (expressions, statements, calls)
constexpr int64_t kMaxSteps = kMaxRenderSteps;
constexpr int64_t kBytesPerStep = kRenderBytesPerStep;
// A loop iteration costs a frame and a `loop` object (about ten allocations): it counts as 4 steps.
constexpr int64_t kStepsPerIteration = 4;

// Checked 64-bit integer arithmetic: Python ints do not overflow; ours fail with a clear error.
[[noreturn]] void overflow(const char* op) { fail(std::string("integer overflow in ") + op + " (integers are 64-bit here)"); }
int64_t add_checked(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow(op);
  return r;
}
int64_t sub_checked(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow(op);
  return r;
}
int64_t mul_checked(int64_t a, int64_t b, const char* op) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow(op);
  return r;
}

class Evaluator {
 public:
  explicit Evaluator(std::shared_ptr<const Body> root) : root_(std::move(root)) {}

  Flow exec(const Body& body, const FramePtr& f, std::string& out) {
    Nest nest(*this);
    charge(1);
    for (const auto& s : body) {
      charge(1);
      Flow fl;
      try {
        fl = exec_stmt(*s, f, out);
      } catch (const RenderError& e) {
        if (e.located) throw;
        throw RenderError("chat template error at " + std::to_string(s->line) + ":" + std::to_string(s->col) +
                              ": " + e.what(),
                          true);
      }
      if (fl != Flow::Normal) return fl;
    }
    return Flow::Normal;
  }

  // Evaluates `e`, charging the step budget one step plus one per kBytesPerStep bytes of a string
  // result (strings are values: every result is a copy) or of a list the expression built (a list
  // literal, `+`, `*`; other lists are shared by reference, like Python's, and cost nothing to pass).
  Value eval(const Expr& e, const FramePtr& f) {
    Nest nest(*this);
    Value v = eval_node(e, f);
    if (v.is_string()) charge(v.str().size() / kBytesPerStep);
    else if (v.is_list() && (e.kind == Expr::Kind::List || e.kind == Expr::Kind::Binary))
      charge(v.items().size() * sizeof(Value) / kBytesPerStep);
    return v;
  }

  Value eval_node(const Expr& e, const FramePtr& f) {
    charge(1);
    switch (e.kind) {
      case Expr::Kind::Literal: return e.value;
      case Expr::Kind::Name: {
        if (const Value* v = f->lookup(e.name)) return *v;
        return Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::List: {
        ValueList items;
        for (const auto& a : e.args) items.push_back(eval(*a, f));
        return Value::list(std::move(items), e.tuple);
      }
      case Expr::Kind::Dict: {
        ValueDict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          Value k = eval(*e.args[i], f);
          if (!k.is_string()) fail("only string keys are supported in dict literals");
          Value v = eval(*e.args[i + 1], f);
          bool replaced = false;
          for (auto& [key, old] : d)
            if (key == k.str()) {
              old = v;
              replaced = true;
            }
          if (!replaced) d.emplace_back(k.str(), std::move(v));
        }
        return Value::dict(std::move(d));
      }
      case Expr::Kind::Attr: return get_attr(eval(*e.args[0], f), e.name);
      case Expr::Kind::Item: return get_item(eval(*e.args[0], f), eval(*e.args[1], f));
      case Expr::Kind::Slice: {
        auto part = [&](size_t i) { return e.args[i] ? eval(*e.args[i], f) : Value(); };
        return slice(eval(*e.args[0], f), part(1), part(2), part(3));
      }
      case Expr::Kind::Call: {
        Value callee = eval(*e.args[0], f);
        CallArgs args = eval_args(e, f);
        return call(callee, args);
      }
      case Expr::Kind::Filter: {
        Value operand = eval(*e.args[0], f);
        return apply_filter(e.name, operand, eval_args(e, f));
      }
      case Expr::Kind::Test: {
        bool r = apply_test(e.name, eval(*e.args[0], f), eval_args(e, f));
        return Value(e.negated ? !r : r);
      }
      case Expr::Kind::Unary: {
        Value v = eval(*e.args[0], f);
        if (e.name == "not") return Value(!truthy(v));
        if (v.is_undefined()) undefined_error(v);
        if (!v.is_number()) fail("bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
        if (e.name == "+") return v.is_float() ? v : Value(v.as_int());
        if (v.is_float()) return Value(-v.as_double());
        return Value(sub_checked(0, v.as_int(), "unary -"));
      }
      case Expr::Kind::Binary: {
        Value l = eval(*e.args[0], f);
        if (e.name == "and") return truthy(l) ? eval(*e.args[1], f) : l;
        if (e.name == "or") return truthy(l) ? l : eval(*e.args[1], f);
        return binary(e.name, l, eval(*e.args[1], f));
      }
      case Expr::Kind::Compare: {
        Value l = eval(*e.args[0], f);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value r = eval(*e.args[i + 1], f);
          if (!compare(e.ops[i], l, r)) return Value(false);
          l = std::move(r);
        }
        return Value(true);
      }
      case Expr::Kind::Cond:
        if (truthy(eval(*e.args[1], f))) return eval(*e.args[0], f);
        return e.args[2] ? eval(*e.args[2], f) : Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
    return Value();
  }

 private:
  // RAII guard of the evaluation nesting (C++ stack depth).
  struct Nest {
    Evaluator& ev;
    explicit Nest(Evaluator& e) : ev(e) {
      if (++ev.nesting_ > kMaxNesting) {
        --ev.nesting_;
        fail("template nesting too deep: maximum recursion depth exceeded (more than " +
             std::to_string(kMaxNesting) + " nested expressions, statements and calls)");
      }
    }
    ~Nest() { --ev.nesting_; }
  };

  void charge(uint64_t n) {
    steps_ += static_cast<int64_t>(std::min<uint64_t>(n, uint64_t(kMaxSteps)));
    if (steps_ > kMaxSteps)
      fail("template exceeded the render step limit (" + std::to_string(kMaxSteps) +
           " steps; an endless or runaway loop?)");
  }

  CallArgs eval_args(const Expr& e, const FramePtr& f) {
    CallArgs a;
    for (size_t i = 1; i < e.args.size(); ++i) a.pos.push_back(eval(*e.args[i], f));
    for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, eval(*v, f));
    return a;
  }

  Value call(const Value& callee, const CallArgs& args) {
    if (callee.is_undefined()) undefined_error(callee);
    if (!callee.is_callable()) fail("'" + type_name(callee) + "' object is not callable");
    if (++depth_ > kMaxDepth) fail("maximum recursion depth exceeded");
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } g{depth_};
    return callee.fn()(args);
  }

  // Applies a filter chain whose innermost operand slot is null to `v` ({% filter %}, {% set x | f %}).
  Value apply_chain(const Expr& chain, Value v, const FramePtr& f) {
    if (chain.args[0]) v = apply_chain(*chain.args[0], std::move(v), f);
    return apply_filter(chain.name, v, eval_args(chain, f));
  }

  static Value arith(const std::string& op, const Value& l, const Value& r) {
    bool fl = l.is_float() || r.is_float();
    if (op == "/") {
      if (r.as_double() == 0.0) fail("division by zero");
      return Value(l.as_double() / r.as_double());
    }
    if (op == "**") {
      if (!fl && r.as_int() >= 0) {  // exponentiation by squaring, overflow checked
        int64_t base = l.as_int(), res = 1;
        for (int64_t k = r.as_int(); k > 0; k >>= 1) {
          if (k & 1) res = mul_checked(res, base, "**");
          if (k > 1) base = mul_checked(base, base, "**");
        }
        return Value(res);
      }
      return Value(std::pow(l.as_double(), r.as_double()));
    }
    if (fl) {
      double a = l.as_double(), b = r.as_double();
      if (op == "+") return Value(a + b);
      if (op == "-") return Value(a - b);
      if (op == "*") return Value(a * b);
      if (b == 0.0) fail("float division by zero");
      if (op == "//") return Value(std::floor(a / b));
      double m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return Value(m);
    }
    int64_t a = l.as_int(), b = r.as_int();
    if (op == "+") return Value(add_checked(a, b, "+"));
    if (op == "-") return Value(sub_checked(a, b, "-"));
    if (op == "*") return Value(mul_checked(a, b, "*"));
    if (b == 0) fail("integer division or modulo by zero");
    if (b == -1) {  // a / -1 overflows for INT64_MIN; the remainder is always 0
      if (op == "%") return Value(int64_t(0));
      return Value(sub_checked(0, a, "//"));
    }
    int64_t q = a / b, m = a % b;
    if (m != 0 && ((m < 0) != (b < 0))) {
      --q;
      m += b;
    }
    return op == "//" ? Value(q) : Value(m);
  }

  static Value repeat(const Value& seq, int64_t n) {
    const uint64_t unit = seq.is_string() ? seq.str().size() : seq.items().size() * sizeof(Value);
    if (n > 0 && unit > 0 && uint64_t(n) > uint64_t(kMaxRenderValueBytes) / unit)
      fail("sequence repetition too large (more than " + std::to_string(kMaxRenderValueBytes) + " bytes)");
    if (seq.is_string()) {
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += seq.str();
      return Value(s);
    }
    ValueList items;
    for (int64_t i = 0; i < n; ++i) items.insert(items.end(), seq.items().begin(), seq.items().end());
    return Value::list(std::move(items), seq.is_tuple());
  }

  static Value binary(const std::string& op, const Value& l, const Value& r) {
    if (op == "~") return Value(to_str(l) + to_str(r));
    if (l.is_undefined()) undefined_error(l);
    if (r.is_undefined()) undefined_error(r);
    if (l.is_number() && r.is_number()) return arith(op, l, r);
    if (op == "+") {
      if (l.is_string() && r.is_string()) return Value(l.str() + r.str());
      if (l.is_list() && r.is_list() && l.is_tuple() == r.is_tuple()) {
        ValueList items = l.items();
        items.insert(items.end(), r.items().begin(), r.items().end());
        return Value::list(std::move(items), l.is_tuple());
      }
      if (l.is_string()) fail("can only concatenate str (not \"" + type_name(r) + "\") to str");
    }
    if (op == "*") {
      if ((l.is_string() || l.is_list()) && (r.is_int() || r.is_bool())) return repeat(l, r.as_int());
      if ((r.is_string() || r.is_list()) && (l.is_int() || l.is_bool())) return repeat(r, l.as_int());
    }
    if (op == "%" && l.is_string()) return Value(percent_format(l.str(), r.is_tuple() ? r.items() : ValueList{r}));
    fail("unsupported operand type(s) for " + op + ": '" + type_name(l) + "' and '" + type_name(r) + "'");
  }

  static bool compare(const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return py_eq(l, r);
    if (op == "!=") return !py_eq(l, r);
    if (op == "in") return contains(r, l);
    if (op == "notin") return !contains(r, l);
    if (l.is_undefined()) undefined_error(l);
    if (r.is_undefined()) undefined_error(r);
    int c = py_cmp(l, r, op);
    if (op == "<") return c < 0;
    if (op == ">") return c > 0;
    if (op == "<=") return c <= 0;
    return c >= 0;
  }

  void assign(const FramePtr& f, const std::vector<std::string>& targets, const Value& v) {
    if (targets.size() == 1) {
      f->set(targets[0], v);
      return;
    }
    ValueList items = iterate(v);
    if (items.size() < targets.size())
      fail("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
           std::to_string(items.size()) + ")");
    if (items.size() > targets.size())
      fail("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    for (size_t i = 0; i < targets.size(); ++i) f->set(targets[i], items[i]);
  }

  // The macro keeps a weak reference to its defining frame: that frame stores the macro, so a strong
  // one would be a reference cycle.
  Value make_macro(const Stmt& s, const FramePtr& defining, const std::string& name) {
    std::weak_ptr<Frame> weak = defining;
    return Value::function(name, [this, &s, weak, name](const CallArgs& a) -> Value {
      auto mf = std::make_shared<Frame>();
      mf->parent = weak.lock();
      if (!mf->parent) fail("macro '" + name + "' called after its scope ended");
      if (a.pos.size() > s.params.size())
        fail("macro '" + name + "' takes not more than " + std::to_string(s.params.size()) + " argument(s)");
      for (const auto& [k, v] : a.kw) {
        bool known = k == "caller";
        for (const auto& p : s.params) known = known || p.name == k;
        if (!known) fail("macro '" + name + "' takes no keyword argument '" + k + "'");
        if (k == "caller") mf->set(k, v);
      }
      for (size_t i = 0; i < s.params.size(); ++i) {
        const auto& p = s.params[i];
        if (const Value* v = a.get(i, p.name)) mf->set(p.name, *v);
        else if (p.default_value) mf->set(p.name, eval(*p.default_value, mf));
        else mf->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
      }
      std::string out;
      exec(s.body, mf, out);
      return Value(out);
    });
  }

  Value loop_object(const ValueList& items, size_t i) {
    const int64_t n = static_cast<int64_t>(items.size()), k = static_cast<int64_t>(i);
    ValueDict d = {{"index", Value(k + 1)},         {"index0", Value(k)},
                   {"revindex", Value(n - k)},      {"revindex0", Value(n - k - 1)},
                   {"first", Value(k == 0)},        {"last", Value(k == n - 1)},
                   {"length", Value(n)},            {"depth", Value(1)},
                   {"depth0", Value(0)}};
    if (k > 0) d.emplace_back("previtem", items[i - 1]);
    if (k + 1 < n) d.emplace_back("nextitem", items[i + 1]);
    d.emplace_back("cycle", Value::function("cycle", [k](const CallArgs& a) -> Value {
                     if (a.pos.empty()) fail("no items for cycling given");
                     return a.pos[static_cast<size_t>(k) % a.pos.size()];
                   }));
    return Value::dict(std::move(d));
  }

  Flow exec_for(const Stmt& s, const FramePtr& f, std::string& out) {
    ValueList items = iterate(eval(*s.expr, f));
    if (s.cond) {
      ValueList kept;
      for (auto& it : items) {
        auto cf = std::make_shared<Frame>();
        cf->parent = f;
        assign(cf, s.targets, it);
        if (truthy(eval(*s.cond, cf))) kept.push_back(std::move(it));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      auto ef = std::make_shared<Frame>();
      ef->parent = f;
      exec(s.else_body, ef, out);
      return Flow::Normal;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      charge(kStepsPerIteration);
      auto bf = std::make_shared<Frame>();
      bf->parent = f;
      bf->set("loop", loop_object(items, i));
      assign(bf, s.targets, items[i]);
      if (exec(s.body, bf, out) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  Flow exec_stmt(const Stmt& s, const FramePtr& f, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::Text:
        charge(s.text.size() / kBytesPerStep);
        out += s.text;
        return Flow::Normal;
      case Stmt::Kind::Output: out += to_str(eval(*s.expr, f)); return Flow::Normal;
      case Stmt::Kind::If:
        for (const auto& [cond, body] : s.branches)
          if (!cond || truthy(eval(*cond, f))) return exec(body, f, out);
        return Flow::Normal;
      case Stmt::Kind::For: return exec_for(s, f, out);
      case Stmt::Kind::Set: {
        Value v = eval(*s.expr, f);
        if (s.text.empty()) {
          assign(f, s.targets, v);
        } else {
          const Value* target = f->lookup(s.targets[0]);
          if (!target || !target->is_namespace()) fail("cannot assign attribute on non-namespace object");
          ValueDict& attrs = target->entries_mut();
          bool done = false;
          for (auto& [k, old] : attrs)
            if (k == s.text) {
              old = v;
              done = true;
            }
          if (!done) attrs.emplace_back(s.text, v);
        }
        return Flow::Normal;
      }
      case Stmt::Kind::SetBlock: {
        std::string captured;
        exec(s.body, f, captured);
        Value v(captured);
        if (s.expr) v = apply_chain(*s.expr, v, f);
        f->set(s.targets[0], v);
        return Flow::Normal;
      }
      case Stmt::Kind::Macro: f->set(s.text, make_macro(s, f, s.text)); return Flow::Normal;
      case Stmt::Kind::CallBlock: {
        const Expr& c = *s.expr;
        Value callee = eval(*c.args[0], f);
        CallArgs args = eval_args(c, f);
        // The caller macro shares the call block's params and body.
        Value caller = Value::function("caller", [this, &s, f](const CallArgs& a) -> Value {
          auto cf = std::make_shared<Frame>();
          cf->parent = f;
          for (size_t i = 0; i < s.params.size(); ++i) {
            const auto& p = s.params[i];
            if (const Value* v = a.get(i, p.name)) cf->set(p.name, *v);
            else if (p.default_value) cf->set(p.name, eval(*p.default_value, cf));
            else cf->set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
          }
          std::string o;
          exec(s.body, cf, o);
          return Value(o);
        });
        args.kw.emplace_back("caller", caller);
        out += to_str(call(callee, args));
        return Flow::Normal;
      }
      case Stmt::Kind::FilterBlock: {
        std::string captured;
        exec(s.body, f, captured);
        out += to_str(apply_chain(*s.expr, Value(captured), f));
        return Flow::Normal;
      }
      case Stmt::Kind::With: {
        auto wf = std::make_shared<Frame>();
        wf->parent = f;
        for (size_t i = 0; i < s.targets.size(); ++i) wf->set(s.targets[i], eval(*s.values[i], f));
        return exec(s.body, wf, out);
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
      case Stmt::Kind::Scope: return exec(s.body, f, out);
    }
    return Flow::Normal;
  }

  std::shared_ptr<const Body> root_;
  int depth_ = 0;
  int nesting_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Template::Template(const std::string& source) : body_(std::make_shared<const Body>(parse_template(source))) {}

std::string Template::render(const Value& context) const {
  if (!context.is_dict()) throw Error("chat template context must be a JSON object");
  auto globals = std::make_shared<Frame>();
  globals->vars = make_globals();
  auto root = std::make_shared<Frame>();
  root->parent = globals;
  root->vars = context.entries();
  Evaluator ev(body_);
  std::string out;
  Flow fl = ev.exec(*body_, root, out);
  (void)fl;  // break/continue outside a loop: jinja2 rejects them at compile time; we ignore them.
  return out;
}

}  // namespace wgllm::jinja

namespace wgllm {
std::string render_jinja(const std::string& source, const nlohmann::json& ctx) {
  return jinja::Template(source).render(jinja::from_json(ctx));
}
std::string render_jinja(const std::string& source, const nlohmann::ordered_json& ctx) {
  return jinja::Template(source).render(jinja::from_json(ctx));
}
}  // namespace wgllm
