// AST of the Jinja2 subset. One generic node type per category keeps the parser and evaluator small.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace wgllm::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    List,      // args = items (tuple when `tuple`)
    Dict,      // args = key0, value0, key1, value1, ...
    Attr,      // args[0].name
    Item,      // args[0][args[1]]
    Slice,     // args[0][args[1]:args[2]:args[3]] (null parts allowed)
    Call,      // args[0](args[1..], kwargs)
    Filter,    // args[0] | name(args[1..], kwargs); args[0] may be null for {% filter %} blocks
    Test,      // args[0] is [not] name(args[1..], kwargs)
    Unary,     // op in {"not", "-", "+"}, args[0]
    Binary,    // args[0] op args[1]; op in + - * / // % ** ~ and or
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ... (ops: == != < > <= >= in notin)
    Cond,      // args[0] if args[1] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0, col = 0;
  Value value;
  std::string name;  // Name / Attr / Filter / Test name, or Unary/Binary operator
  bool tuple = false;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;

  Expr(Kind k, int l, int c) : kind(k), line(l), col(c) {}
  Expr(const Expr&) = delete;
  Expr& operator=(const Expr&) = delete;
  /// Iterative teardown: operator chains (a + b + c ..., x|f|f ...) are parsed in loops and can be
  /// arbitrarily deep, so the children are released through an explicit stack, not by recursion.
  ~Expr() {
    std::vector<ExprPtr> pending;
    auto adopt = [&pending](Expr& e) {
      for (auto& a : e.args)
        if (a) pending.push_back(std::move(a));
      for (auto& kv : e.kwargs)
        if (kv.second) pending.push_back(std::move(kv.second));
    };
    adopt(*this);
    while (!pending.empty()) {
      ExprPtr e = std::move(pending.back());
      pending.pop_back();
      adopt(*e);
    }  // e, now childless, is destroyed here
  }
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Output,       // {{ expr }}
    If,           // branches (cond, body); a null cond is the else branch
    For,          // for targets in expr [if cond] body [else else_body]
    Set,          // set targets = expr, or set targets[0].attr = expr
    SetBlock,     // set targets[0] [| filter] body endset
    Macro,        // macro name(params) body
    CallBlock,    // call[(params)] expr body  (body becomes `caller`)
    FilterBlock,  // filter <filter chain in expr, operand null> body
    With,         // with targets = values body
    Break,
    Continue,
    Scope,        // body rendered in place (transformers' {% generation %} block)
  };
  Kind kind;
  int line = 0, col = 0;
  std::string text;  // Text payload, Macro name, Set attribute
  ExprPtr expr;      // Output / For iterable / Set value / CallBlock call / FilterBlock & SetBlock filter
  ExprPtr cond;      // For filter
  std::vector<std::string> targets;
  std::vector<ExprPtr> values;  // With values
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<MacroParam> params;
  Body body, else_body;

  Stmt(Kind k, int l, int c) : kind(k), line(l), col(c) {}
};

/// Parses a template into statements. Throws wgllm::Error with line:col on syntax errors.
Body parse_template(const std::string& source);

}  // namespace wgllm::jinja
