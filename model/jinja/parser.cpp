// Statements: text, {{ }} and the {% %} tags (if, for, set, macro, call, filter, with,
// generation, break, continue), each body parsed up to its end tag.
#include "model/jinja/parser_impl.h"

namespace flashserve::jinja {
namespace detail {

// Statements up to a {% tag %} named in `ends` (left unconsumed: cur() is that name).
Body Parser::subparse(std::initializer_list<std::string_view> ends) {
  Nest nest(*this);
  Body body;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::End) {
      if (ends.size()) fail("unexpected end of template, expected '" + std::string(*ends.begin()) + "'");
      return body;
    }
    if (t.type == TokenType::Text) {
      auto s = at<TextStmt>(t);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::VariableBegin) {
      next();
      auto s = at<PrintStmt>(t);
      s->expr = tuple(false, true, {});
      expect(TokenType::VariableEnd, "end of print statement");
      body.push_back(std::move(s));
    } else if (t.type == TokenType::BlockBegin) {
      next();
      if (cur().type == TokenType::Name && std::find(ends.begin(), ends.end(), cur().text) != ends.end()) return body;
      body.push_back(statement());
      expect(TokenType::BlockEnd, "end of statement block");
    } else {
      fail("unexpected " + describe(t));
    }
  }
}

// `%}` then statements up to one of `ends`; with `drop`, also consumes that end tag's name.
Body Parser::block_body(std::initializer_list<std::string_view> ends, bool drop) {
  expect(TokenType::BlockEnd, "end of statement block");
  Body body = subparse(ends);
  if (drop) next();
  return body;
}

StmtPtr Parser::statement() {
  const Token& t = cur();
  if (t.type != TokenType::Name) fail("tag name expected");
  const std::string& name = t.text;
  if (name == "if") return if_stmt();
  if (name == "for") return for_stmt();
  if (name == "set") return set_stmt();
  if (name == "macro") return macro_stmt();
  if (name == "call") return call_block();
  if (name == "filter") return filter_block();
  if (name == "with" || name == "generation") return with_stmt(name == "generation");
  if (name == "break" || name == "continue") {
    if (loops_ == 0) fail("'" + name + "' outside loop");
    next();
    if (name == "break") return at<BreakStmt>(t);
    return at<ContinueStmt>(t);
  }
  fail("unknown or unsupported tag '" + name + "'");
}

StmtPtr Parser::if_stmt() {
  auto s = at<IfStmt>(next());
  while (true) {
    ExprPtr test = tuple(false, false, {});
    Body body = block_body({"elif", "else", "endif"}, false);
    s->branches.emplace_back(std::move(test), std::move(body));
    const std::string end = next().text;
    if (end == "elif") continue;
    if (end == "else") s->otherwise = block_body({"endif"}, true);
    return s;
  }
}

Target Parser::target(bool with_namespace, std::initializer_list<std::string_view> ends) {
  Target t;
  const bool paren = skip_op("(");
  while (true) {
    t.names.push_back(expect_identifier());
    if (with_namespace && t.names.size() == 1 && skip_op(".")) {
      t.attribute = expect_identifier();
      return t;
    }
    if (!skip_op(",")) break;
    t.unpack = true;
    if ((paren && cur().is_op(")")) || std::any_of(ends.begin(), ends.end(), [&](auto e) { return cur().is_name(e); })) break;
  }
  if (paren) expect_op(")");
  return t;
}

StmtPtr Parser::for_stmt() {
  auto s = at<ForStmt>(next());
  s->target = target(false, {"in"});
  if (!skip_name("in")) fail("expected 'in', got " + describe(cur()));
  s->iterable = tuple(false, false, {"recursive"});
  if (skip_name("if")) s->filter = expression(true);
  if (cur().is_name("recursive")) fail("recursive loops are not supported");
  ++loops_;
  s->body = block_body({"endfor", "else"}, false);
  --loops_;
  if (next().text == "else") s->otherwise = block_body({"endfor"}, true);
  return s;
}

StmtPtr Parser::set_stmt() {
  auto s = at<SetStmt>(next());
  s->target = target(true, {});
  if (skip_op("=")) {
    s->value = tuple(false, true, {});
    return s;
  }
  if (cur().is_op("|")) s->filter = filter_chain(nullptr);
  s->body = block_body({"endset"}, true);
  return s;
}

std::vector<Param> Parser::params() {
  std::vector<Param> ps;
  expect_op("(");
  while (!skip_op(")")) {
    if (!ps.empty()) expect_op(",");
    if (skip_op(")")) break;
    Param p;
    p.name = expect_identifier();
    if (skip_op("=")) p.default_value = expression(true);
    ps.push_back(std::move(p));
  }
  return ps;
}

// Macro and caller bodies are functions of their own: a loop around them does not reach in.
Body Parser::function_body(std::initializer_list<std::string_view> ends) {
  const int saved = loops_;
  loops_ = 0;
  Body body = block_body(ends, true);
  loops_ = saved;
  return body;
}

StmtPtr Parser::macro_stmt() {
  auto s = at<MacroStmt>(next());
  s->name = expect_identifier();
  s->params = params();
  s->body = function_body({"endmacro"});
  return s;
}

StmtPtr Parser::call_block() {
  auto s = at<CallBlockStmt>(next());
  if (cur().is_op("(")) s->params = params();
  s->call = expression(true);
  if (s->call->kind != Expr::Kind::Call) fail("expected a call in {% call %}");
  s->body = function_body({"endcall"});
  return s;
}

StmtPtr Parser::filter_block() {
  auto s = at<FilterBlockStmt>(next());
  s->filter = filter_chain(nullptr, true);
  s->body = block_body({"endfilter"}, true);
  return s;
}

StmtPtr Parser::with_stmt(bool generation) {
  const Token& t = next();
  auto s = at<WithStmt>(t);
  while (!generation && cur().type != TokenType::BlockEnd) {
    if (!s->assignments.empty()) expect_op(",");
    std::string name = expect_identifier();
    expect_op("=");
    s->assignments.emplace_back(std::move(name), expression(true));
  }
  s->body = block_body({generation ? "endgeneration" : "endwith"}, true);
  return s;
}
}  // namespace detail

Body parse(const std::vector<Token>& tokens) { return detail::Parser(tokens).run(); }

}  // namespace flashserve::jinja
