// The parser's class, shared by parser.cpp (statements) and parser_expr.cpp (expressions).
#pragma once
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "model/jinja/parser.h"

namespace flashserve::jinja::detail {

template <typename T>
std::unique_ptr<T> at(const Token& t) {
  auto n = std::make_unique<T>();
  n->line = t.line;
  n->column = t.column;
  return n;
}

inline std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::End: return "end of template";
    case TokenType::Text: return "template text";
    case TokenType::VariableBegin: return "'{{'";
    case TokenType::VariableEnd: return "end of print statement";
    case TokenType::BlockBegin: return "'{%'";
    case TokenType::BlockEnd: return "end of statement block";
    case TokenType::String: return "string literal";
    case TokenType::Integer:
    case TokenType::Float: return "number";
    default: return "'" + t.text + "'";
  }
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Body run() {
    Body body = subparse({});
    if (cur().type != TokenType::End) fail("unexpected " + describe(cur()));
    return body;
  }

 private:
  // ---- plumbing
  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return toks_[std::min(pos_ + ahead, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(message, cur()); }
  [[noreturn]] static void fail_at(const std::string& message, const Token& t) {
    throw TemplateError(ErrorKind::Syntax, message, t.line, t.column);
  }
  bool skip_op(std::string_view op) {
    if (!cur().is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!cur().is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got " + describe(cur()));
  }
  const Token& expect(TokenType type, const char* what) {
    if (cur().type != type) fail(std::string("expected ") + what + ", got " + describe(cur()));
    return next();
  }
  std::string expect_identifier() { return expect(TokenType::Name, "a name").text; }

  // Every recursive descent goes through here.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxSyntaxDepth) p_.fail("template nested deeper than " + std::to_string(kMaxSyntaxDepth) + " levels");
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  // ---- statements
  // Statements up to a {% tag %} named in `ends` (left unconsumed: cur() is that name).
  Body subparse(std::initializer_list<std::string_view> ends);
  // `%}` then statements up to one of `ends`; with `drop`, also consumes that end tag's name.
  Body block_body(std::initializer_list<std::string_view> ends, bool drop);
  StmtPtr statement();
  StmtPtr if_stmt();
  Target target(bool with_namespace, std::initializer_list<std::string_view> ends);
  StmtPtr for_stmt();
  StmtPtr set_stmt();
  std::vector<Param> params();
  // Macro and caller bodies are functions of their own: a loop around them does not reach in.
  Body function_body(std::initializer_list<std::string_view> ends);
  StmtPtr macro_stmt();
  StmtPtr call_block();
  StmtPtr filter_block();
  StmtPtr with_stmt(bool generation);

  // ---- expressions
  bool tuple_end(std::initializer_list<std::string_view> ends) const;
  // Comma-separated expressions make a tuple; one without a comma is itself.
  ExprPtr tuple(bool parenthesised, bool with_cond, std::initializer_list<std::string_view> ends);
  ExprPtr expression(bool with_cond);
  ExprPtr binary(Op op, const Token& t, ExprPtr left, ExprPtr right);
  ExprPtr or_expr();
  ExprPtr and_expr();
  ExprPtr not_expr();
  ExprPtr compare();
  ExprPtr math1();
  ExprPtr concat();
  ExprPtr math2();
  ExprPtr power();
  ExprPtr unary(bool with_filter);
  ExprPtr primary();
  ExprPtr postfix(ExprPtr e);
  ExprPtr subscript();
  Args call_args();
  ExprPtr call(ExprPtr callee);
  std::string dotted_name();
  // `| f(args) | g` applied to `input` (null: the text of a block); with `inline_first`, the first
  // filter's name comes without a leading `|` ({% filter upper %}).
  ExprPtr filter_chain(ExprPtr input, bool inline_first = false);
  ExprPtr filters_and_tests(ExprPtr e);

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace flashserve::jinja::detail
