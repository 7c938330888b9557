// Lexer of the Jinja2 subset: splits a template into data and tag tokens, applying jinja2's
// whitespace rules as transformers configures them (trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, newline_sequence "\n").
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace wgllm::jinja {

enum class Tok { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string text;  // data text, name, decoded string literal, or operator
  int64_t ival = 0;
  double fval = 0;
  int line = 1, col = 1;
};

/// Tokenizes `source`. Throws wgllm::Error("chat template syntax error at LINE:COL: ...").
std::vector<Token> tokenize(const std::string& source);

/// jinja2 normalizes "\r\n" and "\r" to "\n" and drops one trailing newline before lexing.
std::string normalize_source(const std::string& source);

[[noreturn]] void syntax_error(int line, int col, const std::string& message);

}  // namespace wgllm::jinja
