// Splits a template into text and the tokens inside {{ }} and {% %} tags, applying whitespace
// control as Hugging Face's environment does: trim_blocks (the first newline after a block or
// comment tag goes), lstrip_blocks (spaces and tabs before a block or comment tag on its own line
// go), "-" strips all whitespace on that side, "+" keeps it. Comments are dropped and {% raw %}
// bodies become text. Like jinja2, line breaks are normalised to "\n" and one trailing newline of
// the template is removed.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::jinja {

enum class TokenType {
  Text,           // template text (text: the data)
  VariableBegin,  // {{
  VariableEnd,    // }}
  BlockBegin,     // {%
  BlockEnd,       // %}
  Name,           // identifier or keyword (text)
  String,         // string literal (text: the unescaped value)
  Integer,        // (integer)
  Float,          // (number)
  Operator,       // text: "+", "//", "(", "==", ...
  End,            // end of the template
};

struct Token {
  TokenType type = TokenType::End;
  std::string text;
  int64_t integer = 0;
  double number = 0;
  int line = 1, column = 1;  // where the token starts, 1-based

  bool is(TokenType t, std::string_view s) const { return type == t && text == s; }
  bool is_name(std::string_view s) const { return is(TokenType::Name, s); }
  bool is_op(std::string_view s) const { return is(TokenType::Operator, s); }
};

// Throws TemplateError (Syntax) for unterminated tags, comments and strings, unbalanced brackets,
// bad escapes and characters that start no token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace flashserve::jinja
