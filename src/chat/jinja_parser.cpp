// Recursive-descent parser following jinja2/parser.py precedence:
//   condexpr (a if c else b) < or < and < not < compare (== != < > <= >= in, not in; chainable)
//   < + - < ~ < * / // % < ** < unary - + < primary, postfix (. [] ()), then filters `|` and tests `is`.
// Note jinja2 applies filters after unary minus: `-3|abs` is abs(-3). Unknown filter and test names
// fail when evaluated (jinja2 3.1 defers them to runtime inside `if` blocks and conditional
// expressions, and rejects them at compile time elsewhere; we always defer).
#include <set>

#include "chat/jinja.h"
#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace wgllm::jinja {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  Body parse() {
    std::string found;
    Body b = subparse({}, found);
    return b;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view s) const { return cur().type == Tok::Op && cur().text == s; }
  bool is_name(std::string_view s) const { return cur().type == Tok::Name && cur().text == s; }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Data: return "template data";
      case Tok::VarBegin: return "begin of print statement";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "begin of statement block";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::Eof: return "end of template";
      case Tok::String: return "string";
      case Tok::Int: return "integer";
      case Tok::Float: return "float";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void error(const std::string& msg) const { syntax_error(cur().line, cur().col, msg); }
  [[noreturn]] void unexpected(const std::string& expected) const {
    error("expected " + expected + ", got " + describe(cur()));
  }
  void expect_op(std::string_view s) {
    if (!is_op(s)) unexpected("'" + std::string(s) + "'");
    advance();
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type) unexpected(what);
    advance();
  }
  void expect_block_end() { expect(Tok::BlockEnd, "end of statement block"); }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("name");
    std::string n = cur().text;
    advance();
    return n;
  }
  ExprPtr node(Expr::Kind k) const { return std::make_unique<Expr>(k, cur().line, cur().col); }

  // ---- statements
  Body subparse(const std::vector<std::string>& ends, std::string& found) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!ends.empty()) {
          std::string want;
          for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
          error("unexpected end of template, expected " + want);
        }
        return body;
      }
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::Text, t.line, t.col);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::VarBegin) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::Output, t.line, t.col);
        advance();
        s->expr = parse_tuple(true, false);
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        advance();
        if (cur().type != Tok::Name) unexpected("statement name");
        for (const auto& e : ends)
          if (cur().text == e) {
            found = e;
            advance();
            return body;
          }
        body.push_back(parse_statement());
      } else {
        unexpected("template data or tag");
      }
    }
  }

  StmtPtr stmt(Stmt::Kind k) const { return std::make_unique<Stmt>(k, cur().line, cur().col); }

  // RAII guard of the parser's recursion (nested blocks, parentheses, unary operators): bounds the
  // C++ stack for any input (jinja.h, kMaxParseNesting).
  struct Nest {
    Parser& p;
    explicit Nest(Parser& q) : p(q) {
      if (++p.nest_ > kMaxParseNesting)
        p.error("template nesting too deep (more than " + std::to_string(kMaxParseNesting) +
                " nested blocks, brackets or operators)");
    }
    ~Nest() { --p.nest_; }
  };

  StmtPtr parse_statement() {
    Nest nest(*this);
    const std::string name = cur().text;
    StmtPtr s;
    std::string found;
    if (name == "if") {
      s = stmt(Stmt::Kind::If);
      advance();
      ExprPtr cond = parse_tuple(false, false);
      for (;;) {
        expect_block_end();
        Body b = subparse({"elif", "else", "endif"}, found);
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (found == "elif") {
          cond = parse_tuple(false, false);
          continue;
        }
        if (found == "else") {
          expect_block_end();
          s->branches.emplace_back(nullptr, subparse({"endif"}, found));
        }
        break;
      }
    } else if (name == "for") {
      s = stmt(Stmt::Kind::For);
      advance();
      s->targets = parse_targets();
      if (!is_name("in")) unexpected("'in'");
      advance();
      s->expr = parse_tuple(false, false);
      if (is_name("if")) {
        advance();
        s->cond = parse_expression(true);
      }
      if (is_name("recursive")) error("recursive for loops are not supported");
      expect_block_end();
      s->body = subparse({"endfor", "else"}, found);
      if (found == "else") {
        expect_block_end();
        s->else_body = subparse({"endfor"}, found);
      }
    } else if (name == "set") {
      int line = cur().line, col = cur().col;
      advance();
      std::string first = expect_name();
      if (is_op(".")) {
        advance();
        s = std::make_unique<Stmt>(Stmt::Kind::Set, line, col);
        s->targets = {first};
        s->text = expect_name();
        expect_op("=");
        s->expr = parse_tuple(true, false);
      } else {
        std::vector<std::string> targets{first};
        while (is_op(",")) {
          advance();
          targets.push_back(expect_name());
        }
        if (is_op("=")) {
          advance();
          s = std::make_unique<Stmt>(Stmt::Kind::Set, line, col);
          s->targets = std::move(targets);
          s->expr = parse_tuple(true, false);
        } else {
          if (targets.size() != 1) unexpected("'='");
          s = std::make_unique<Stmt>(Stmt::Kind::SetBlock, line, col);
          s->targets = std::move(targets);
          if (is_op("|")) s->expr = parse_filter_chain(nullptr);
          expect_block_end();
          s->body = subparse({"endset"}, found);
        }
      }
    } else if (name == "macro") {
      s = stmt(Stmt::Kind::Macro);
      advance();
      s->text = expect_name();
      s->params = parse_params();
      expect_block_end();
      s->body = subparse({"endmacro"}, found);
    } else if (name == "call") {
      s = stmt(Stmt::Kind::CallBlock);
      advance();
      if (is_op("(")) s->params = parse_params();
      s->expr = parse_expression(true);
      if (s->expr->kind != Expr::Kind::Call) error("expected call");
      expect_block_end();
      s->body = subparse({"endcall"}, found);
    } else if (name == "filter") {
      s = stmt(Stmt::Kind::FilterBlock);
      s->expr = parse_filter_chain(nullptr);
      expect_block_end();
      s->body = subparse({"endfilter"}, found);
    } else if (name == "with") {
      s = stmt(Stmt::Kind::With);
      advance();
      while (cur().type != Tok::BlockEnd) {
        if (!s->targets.empty()) expect_op(",");
        s->targets.push_back(expect_name());
        expect_op("=");
        s->values.push_back(parse_expression(true));
      }
      expect_block_end();
      s->body = subparse({"endwith"}, found);
    } else if (name == "break" || name == "continue") {
      s = stmt(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue);
      advance();
    } else if (name == "generation") {  // transformers' AssistantTracker extension
      s = stmt(Stmt::Kind::Scope);
      advance();
      expect_block_end();
      s->body = subparse({"endgeneration"}, found);
    } else {
      error("encountered unknown tag '" + name + "'");
    }
    expect_block_end();
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) advance();
    for (;;) {
      names.push_back(expect_name());
      if (!is_op(",")) break;
      advance();
      if (paren && is_op(")")) break;
    }
    if (paren) expect_op(")");
    return names;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        advance();
        p.default_value = parse_expression(true);
      }
      params.push_back(std::move(p));
    }
    advance();
    return params;
  }

  // ---- expressions
  bool tuple_end() const {
    Tok t = cur().type;
    return t == Tok::BlockEnd || t == Tok::VarEnd || t == Tok::Eof || is_op(")") || is_op("=") ||
           is_name("if") || is_name("recursive");
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens) {
    auto tup = node(Expr::Kind::List);
    tup->tuple = true;
    bool is_tuple = false;
    for (;;) {
      if (!tup->args.empty()) expect_op(",");
      if (tuple_end()) break;
      tup->args.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!tup->args.empty()) return std::move(tup->args[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    return tup;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    Nest nest(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      auto c = node(Expr::Kind::Cond);
      advance();
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (is_name("else")) {
        advance();
        other = parse_expression(true);
      }
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, int line, int col) {
    auto b = std::make_unique<Expr>(Expr::Kind::Binary, line, col);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = cur().line, col = cur().col;
      advance();
      l = binary("or", std::move(l), parse_and(), line, col);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = cur().line, col = cur().col;
      advance();
      l = binary("and", std::move(l), parse_not(), line, col);
    }
    return l;
  }
  ExprPtr parse_not() {
    Nest nest(*this);
    if (is_name("not")) {
      auto u = node(Expr::Kind::Unary);
      u->name = "not";
      advance();
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                    cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek(1).type == Tok::Name && peek(1).text == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::Compare);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line, col = cur().col;
      advance();
      l = binary(op, std::move(l), parse_concat(), line, col);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      int line = cur().line, col = cur().col;
      advance();
      l = binary("~", std::move(l), parse_math2(), line, col);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line, col = cur().col;
      advance();
      l = binary(op, std::move(l), parse_pow(), line, col);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line, col = cur().col;
      advance();
      l = binary("**", std::move(l), parse_unary(true), line, col);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr n;
    if (is_op("-") || is_op("+")) {
      n = node(Expr::Kind::Unary);
      n->name = cur().text;
      advance();
      n->args.push_back(parse_unary(false));
    } else {
      n = parse_primary();
    }
    n = parse_postfix(std::move(n));
    if (with_filter) n = parse_filter_expr(std::move(n));
    return n;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    ExprPtr n;
    switch (t.type) {
      case Tok::Name: {
        n = node(Expr::Kind::Literal);
        if (t.text == "true" || t.text == "True") n->value = Value(true);
        else if (t.text == "false" || t.text == "False") n->value = Value(false);
        else if (t.text == "none" || t.text == "None") n->value = Value::none();
        else {
          n->kind = Expr::Kind::Name;
          n->name = t.text;
        }
        advance();
        return n;
      }
      case Tok::String: {
        n = node(Expr::Kind::Literal);
        std::string s;
        while (cur().type == Tok::String) {
          s += cur().text;
          advance();
        }
        n->value = Value(std::move(s));
        return n;
      }
      case Tok::Int:
      case Tok::Float:
        n = node(Expr::Kind::Literal);
        n->value = t.type == Tok::Int ? Value(t.ival) : Value(t.fval);
        advance();
        return n;
      case Tok::Op:
        if (t.text == "(") {
          advance();
          n = parse_tuple(true, true);
          expect_op(")");
          return n;
        }
        if (t.text == "[") {
          n = node(Expr::Kind::List);
          advance();
          while (!is_op("]")) {
            if (!n->args.empty()) expect_op(",");
            if (is_op("]")) break;
            n->args.push_back(parse_expression(true));
          }
          advance();
          return n;
        }
        if (t.text == "{") {
          n = node(Expr::Kind::Dict);
          advance();
          while (!is_op("}")) {
            if (!n->args.empty()) expect_op(",");
            if (is_op("}")) break;
            n->args.push_back(parse_expression(true));
            expect_op(":");
            n->args.push_back(parse_expression(true));
          }
          advance();
          return n;
        }
        break;
      default: break;
    }
    error("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr n) {
    for (;;) {
      if (is_op(".")) {
        advance();
        if (cur().type == Tok::Name) {
          auto a = node(Expr::Kind::Attr);
          a->name = cur().text;
          a->args.push_back(std::move(n));
          advance();
          n = std::move(a);
        } else if (cur().type == Tok::Int) {
          auto a = node(Expr::Kind::Item);
          auto k = node(Expr::Kind::Literal);
          k->value = Value(cur().ival);
          a->args.push_back(std::move(n));
          a->args.push_back(std::move(k));
          advance();
          n = std::move(a);
        } else {
          unexpected("name or number");
        }
      } else if (is_op("[")) {
        n = parse_subscript(std::move(n));
      } else if (is_op("(")) {
        n = parse_call(std::move(n), Expr::Kind::Call, "");
      } else {
        return n;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj) {
    auto s = node(Expr::Kind::Item);
    advance();  // [
    ExprPtr start, stop, step;
    if (is_op("]")) {  // jinja2: x[] subscripts with an empty tuple
      start = node(Expr::Kind::List);
      start->tuple = true;
    } else if (!is_op(":")) {
      start = parse_expression(true);
      if (is_op(",")) {  // x[a, b] subscripts with a tuple
        auto key = node(Expr::Kind::List);
        key->tuple = true;
        key->args.push_back(std::move(start));
        while (is_op(",")) {
          advance();
          if (is_op("]")) break;
          key->args.push_back(parse_expression(true));
        }
        start = std::move(key);
      }
    }
    if (!is_op(":")) {
      expect_op("]");
      s->args.push_back(std::move(obj));
      s->args.push_back(std::move(start));
      return s;
    }
    advance();
    if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
    if (is_op(":")) {
      advance();
      if (!is_op("]")) step = parse_expression(true);
    }
    expect_op("]");
    s->kind = Expr::Kind::Slice;
    s->args.push_back(std::move(obj));
    s->args.push_back(std::move(start));
    s->args.push_back(std::move(stop));
    s->args.push_back(std::move(step));
    return s;
  }

  // Parses "(args, kw=...)" into a node of `kind` whose args[0] is `callee`.
  ExprPtr parse_call(ExprPtr callee, Expr::Kind kind, const std::string& name) {
    auto c = node(kind);
    c->name = name;
    c->args.push_back(std::move(callee));
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args / **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek(1).type == Tok::Op && peek(1).text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        c->kwargs.emplace_back(key, parse_expression(true));
      } else {
        if (!c->kwargs.empty()) error("positional argument follows keyword argument");
        c->args.push_back(parse_expression(true));
      }
    }
    advance();
    return c;
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".")) {
      advance();
      n += '.';
      n += expect_name();
    }
    return n;
  }

  ExprPtr parse_filter_chain(ExprPtr operand) {
    // Entered at '|' (or at the filter name for {% filter %} blocks).
    do {
      advance();
      int line = cur().line, col = cur().col;
      std::string name = dotted_name();
      ExprPtr f;
      if (is_op("(")) {
        f = parse_call(std::move(operand), Expr::Kind::Filter, name);
      } else {
        f = std::make_unique<Expr>(Expr::Kind::Filter, line, col);
        f->name = name;
        f->args.push_back(std::move(operand));
      }
      f->line = line;
      f->col = col;
      operand = std::move(f);
    } while (is_op("|"));
    return operand;
  }

  ExprPtr parse_filter_expr(ExprPtr n) {
    for (;;) {
      if (is_op("|")) {
        n = parse_filter_chain(std::move(n));
      } else if (is_name("is")) {
        int line = cur().line, col = cur().col;
        advance();
        bool negated = false;
        if (is_name("not")) {
          negated = true;
          advance();
        }
        std::string name = dotted_name();
        ExprPtr t;
        if (is_op("(")) {
          t = parse_call(std::move(n), Expr::Kind::Test, name);
        } else {
          t = std::make_unique<Expr>(Expr::Kind::Test, line, col);
          t->name = name;
          t->args.push_back(std::move(n));
          static const std::set<std::string> stop = {"else", "or", "and", "if", "in", "not", "is"};
          Tok k = cur().type;
          bool arg = (k == Tok::Name && !stop.count(cur().text)) || k == Tok::String || k == Tok::Int ||
                     k == Tok::Float || is_op("[") || is_op("{");
          if (arg) t->args.push_back(parse_postfix(parse_primary()));
        }
        t->line = line;
        t->col = col;
        t->negated = negated;
        n = std::move(t);
      } else if (is_op("(")) {
        n = parse_call(std::move(n), Expr::Kind::Call, "");
      } else {
        return n;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int nest_ = 0;
};

}  // namespace

Body parse_template(const std::string& source) { return Parser(tokenize(source)).parse(); }

}  // namespace wgllm::jinja
