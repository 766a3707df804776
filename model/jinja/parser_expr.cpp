// Expressions, by precedence from the lowest: conditional, or, and, not, comparisons, + -, ~,
// * / // %, **, unary - +, then postfix (attributes, subscripts, calls), filters and tests.
#include "model/jinja/parser_impl.h"

namespace flashserve::jinja::detail {

bool Parser::tuple_end(std::initializer_list<std::string_view> ends) const {
  const Token& t = cur();
  if (t.type == TokenType::VariableEnd || t.type == TokenType::BlockEnd || t.is_op(")")) return true;
  return std::any_of(ends.begin(), ends.end(), [&](auto e) { return t.is_name(e); });
}

// Comma-separated expressions make a tuple; one without a comma is itself.
ExprPtr Parser::tuple(bool parenthesised, bool with_cond, std::initializer_list<std::string_view> ends) {
  Nest nest(*this);
  const Token& start = cur();
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (tuple_end(ends)) break;
    items.push_back(expression(with_cond));
    if (!cur().is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!parenthesised) fail("expected an expression, got " + describe(cur()));
  }
  auto l = at<ListExpr>(start);
  l->items = std::move(items);
  l->tuple = true;
  return l;
}

ExprPtr Parser::expression(bool with_cond) {
  Nest nest(*this);
  ExprPtr e = or_expr();
  while (with_cond && cur().is_name("if")) {
    auto c = at<CondExpr>(next());
    c->then = std::move(e);
    c->test = or_expr();
    if (skip_name("else")) c->otherwise = expression(true);
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::binary(Op op, const Token& t, ExprPtr left, ExprPtr right) {
  auto b = at<BinaryExpr>(t);
  b->op = op;
  b->left = std::move(left);
  b->right = std::move(right);
  return b;
}

ExprPtr Parser::or_expr() {
  ExprPtr e = and_expr();
  while (cur().is_name("or")) {
    const Token& t = next();
    e = binary(Op::Or, t, std::move(e), and_expr());
  }
  return e;
}

ExprPtr Parser::and_expr() {
  ExprPtr e = not_expr();
  while (cur().is_name("and")) {
    const Token& t = next();
    e = binary(Op::And, t, std::move(e), not_expr());
  }
  return e;
}

ExprPtr Parser::not_expr() {
  if (!cur().is_name("not")) return compare();
  Nest nest(*this);
  auto u = at<UnaryExpr>(next());
  u->op = Op::Not;
  u->operand = not_expr();
  return u;
}

ExprPtr Parser::compare() {
  ExprPtr first = math1();
  std::unique_ptr<CompareExpr> c;
  while (true) {
    const Token& t = cur();
    Op op;
    if (t.is_op("==")) op = Op::Eq;
    else if (t.is_op("!=")) op = Op::Ne;
    else if (t.is_op("<")) op = Op::Lt;
    else if (t.is_op("<=")) op = Op::Le;
    else if (t.is_op(">")) op = Op::Gt;
    else if (t.is_op(">=")) op = Op::Ge;
    else if (t.is_name("in")) op = Op::In;
    else if (t.is_name("not") && peek().is_name("in")) op = Op::NotIn;
    else break;
    if (!c) {
      c = at<CompareExpr>(t);
      c->first = std::move(first);
    }
    next();
    if (op == Op::NotIn) next();
    c->rest.emplace_back(op, math1());
  }
  if (c) return c;
  return first;
}

ExprPtr Parser::math1() {
  ExprPtr e = concat();
  while (cur().is_op("+") || cur().is_op("-")) {
    const Token& t = next();
    e = binary(t.text == "+" ? Op::Add : Op::Sub, t, std::move(e), concat());
  }
  return e;
}

ExprPtr Parser::concat() {
  ExprPtr e = math2();
  while (cur().is_op("~")) {
    const Token& t = next();
    e = binary(Op::Concat, t, std::move(e), math2());
  }
  return e;
}

ExprPtr Parser::math2() {
  ExprPtr e = power();
  while (true) {
    const Token& t = cur();
    Op op;
    if (t.is_op("*")) op = Op::Mul;
    else if (t.is_op("/")) op = Op::Div;
    else if (t.is_op("//")) op = Op::FloorDiv;
    else if (t.is_op("%")) op = Op::Mod;
    else return e;
    next();
    e = binary(op, t, std::move(e), power());
  }
}

ExprPtr Parser::power() {
  ExprPtr e = unary(true);
  while (cur().is_op("**")) {
    const Token& t = next();
    e = binary(Op::Pow, t, std::move(e), unary(true));
  }
  return e;
}

ExprPtr Parser::unary(bool with_filter) {
  Nest nest(*this);
  const Token& t = cur();
  ExprPtr e;
  if (t.is_op("-") || t.is_op("+")) {
    next();
    auto u = at<UnaryExpr>(t);
    u->op = t.text == "-" ? Op::Neg : Op::Pos;
    u->operand = unary(false);
    e = std::move(u);
  } else {
    e = primary();
  }
  e = postfix(std::move(e));
  return with_filter ? filters_and_tests(std::move(e)) : std::move(e);
}

ExprPtr Parser::primary() {
  const Token& t = cur();
  if (t.type == TokenType::Name) {
    next();
    if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
      auto c = at<ConstExpr>(t);
      c->value = Value::boolean(t.text[0] == 't' || t.text[0] == 'T');
      return c;
    }
    if (t.text == "none" || t.text == "None") {
      auto c = at<ConstExpr>(t);
      c->value = Value::none();
      return c;
    }
    auto n = at<NameExpr>(t);
    n->name = t.text;
    return n;
  }
  if (t.type == TokenType::String) {
    auto c = at<ConstExpr>(t);
    std::string s;
    while (cur().type == TokenType::String) s += next().text;  // adjacent literals concatenate
    c->value = Value::string(std::move(s));
    return c;
  }
  if (t.type == TokenType::Integer || t.type == TokenType::Float) {
    next();
    auto c = at<ConstExpr>(t);
    c->value = t.type == TokenType::Integer ? Value::integer(t.integer) : Value::number(t.number);
    return c;
  }
  if (t.is_op("(")) {
    next();
    ExprPtr e = tuple(true, true, {});
    expect_op(")");
    return e;
  }
  if (t.is_op("[")) {
    next();
    auto l = at<ListExpr>(t);
    while (!skip_op("]")) {
      if (!l->items.empty()) expect_op(",");
      if (skip_op("]")) break;
      l->items.push_back(expression(true));
    }
    return l;
  }
  if (t.is_op("{")) {
    next();
    auto d = at<DictExpr>(t);
    while (!skip_op("}")) {
      if (!d->items.empty()) expect_op(",");
      if (skip_op("}")) break;
      ExprPtr key = expression(true);
      expect_op(":");
      d->items.emplace_back(std::move(key), expression(true));
    }
    return d;
  }
  fail("unexpected " + describe(t));
}

ExprPtr Parser::postfix(ExprPtr e) {
  while (true) {
    const Token& t = cur();
    if (t.is_op(".")) {
      next();
      if (cur().type == TokenType::Integer) {
        auto g = at<GetItemExpr>(t);
        auto c = at<ConstExpr>(cur());
        c->value = Value::integer(next().integer);
        g->object = std::move(e);
        g->index = std::move(c);
        e = std::move(g);
        continue;
      }
      auto g = at<GetAttrExpr>(t);
      g->object = std::move(e);
      g->name = expect_identifier();
      e = std::move(g);
    } else if (t.is_op("[")) {
      next();
      auto g = at<GetItemExpr>(t);
      g->object = std::move(e);
      std::vector<ExprPtr> parts;
      while (!skip_op("]")) {
        if (!parts.empty()) expect_op(",");
        parts.push_back(subscript());
      }
      if (parts.empty()) fail("expected a subscript");
      if (parts.size() == 1) {
        g->index = std::move(parts.front());
      } else {
        auto tup = at<ListExpr>(t);
        tup->items = std::move(parts);
        tup->tuple = true;
        g->index = std::move(tup);
      }
      e = std::move(g);
    } else if (t.is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::subscript() {
  const Token& t = cur();
  ExprPtr start;
  if (!t.is_op(":")) {
    start = expression(true);
    if (!cur().is_op(":")) return start;
  }
  next();  // ':'
  auto s = at<SliceExpr>(t);
  s->start = std::move(start);
  auto part_end = [&] { return cur().is_op(":") || cur().is_op("]") || cur().is_op(","); };
  if (!part_end()) s->stop = expression(true);
  if (skip_op(":") && !cur().is_op("]") && !cur().is_op(",")) s->step = expression(true);
  return s;
}

Args Parser::call_args() {
  Args a;
  expect_op("(");
  while (!skip_op(")")) {
    if (!a.positional.empty() || !a.keyword.empty() || a.star || a.star_star) {
      expect_op(",");
      if (skip_op(")")) break;
    }
    if (skip_op("*")) {
      a.star = expression(true);
    } else if (skip_op("**")) {
      a.star_star = expression(true);
    } else if (cur().type == TokenType::Name && peek().is_op("=")) {
      std::string key = next().text;
      next();
      a.keyword.emplace_back(std::move(key), expression(true));
    } else {
      if (!a.keyword.empty() || a.star || a.star_star) fail("positional argument after keyword arguments");
      a.positional.push_back(expression(true));
    }
  }
  return a;
}

ExprPtr Parser::call(ExprPtr callee) {
  auto c = at<CallExpr>(cur());
  c->callee = std::move(callee);
  c->args = call_args();
  return c;
}

std::string Parser::dotted_name() {
  std::string name = expect_identifier();
  while (skip_op(".")) name += "." + expect_identifier();
  return name;
}

// `| f(args) | g` applied to `input` (null: the text of a block); with `inline_first`, the first
// filter's name comes without a leading `|` ({% filter upper %}).
ExprPtr Parser::filter_chain(ExprPtr input, bool inline_first) {
  while (inline_first || cur().is_op("|")) {
    Nest nest(*this);
    if (!inline_first) next();
    inline_first = false;
    auto f = at<FilterExpr>(cur());
    f->input = std::move(input);
    f->name = dotted_name();
    if (cur().is_op("(")) f->args = call_args();
    input = std::move(f);
  }
  return input;
}

ExprPtr Parser::filters_and_tests(ExprPtr e) {
  while (true) {
    if (cur().is_op("|")) {
      e = filter_chain(std::move(e));
    } else if (cur().is_name("is")) {
      Nest nest(*this);
      auto t = at<TestExpr>(next());
      t->input = std::move(e);
      t->negated = skip_name("not");
      t->name = dotted_name();
      const Token& a = cur();
      if (a.is_op("(")) {
        t->args = call_args();
      } else if ((a.type == TokenType::Name || a.type == TokenType::String || a.type == TokenType::Integer ||
                  a.type == TokenType::Float || a.is_op("[") || a.is_op("{")) &&
                 !a.is_name("else") && !a.is_name("or") && !a.is_name("and")) {
        if (a.is_name("is")) fail("you cannot chain multiple tests with is");
        t->args.positional.push_back(postfix(primary()));
      }
      e = std::move(t);
    } else if (cur().is_op("(")) {
      e = call(std::move(e));
    } else {
      return e;
    }
  }
}
}  // namespace flashserve::jinja::detail
