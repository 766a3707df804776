// The syntax tree of a parsed template: expressions and statements, each with its position.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/jinja/value.h"

namespace flashserve::jinja {

struct Node {
  int line = 0, column = 0;
};

enum class Op {
  Add, Sub, Mul, Div, FloorDiv, Mod, Pow, Concat,  // binary arithmetic, ~
  And, Or,                                          // short-circuit, Python's value semantics
  Not, Neg, Pos,                                    // unary
  Eq, Ne, Lt, Le, Gt, Ge, In, NotIn,                // comparisons (chainable)
};

struct Expr : Node {
  enum class Kind { Const, Name, List, Dict, GetAttr, GetItem, Slice, Call, Filter, Test, Unary, Binary, Compare, Cond };
  explicit Expr(Kind k) : kind(k) {}
  virtual ~Expr() = default;
  Kind kind;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Args {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star, star_star;  // *args, **kwargs
};

struct ConstExpr : Expr { ConstExpr() : Expr(Kind::Const) {} Value value; };
struct NameExpr : Expr { NameExpr() : Expr(Kind::Name) {} std::string name; };
struct ListExpr : Expr { ListExpr() : Expr(Kind::List) {} std::vector<ExprPtr> items; bool tuple = false; };
struct DictExpr : Expr { DictExpr() : Expr(Kind::Dict) {} std::vector<std::pair<ExprPtr, ExprPtr>> items; };
struct GetAttrExpr : Expr { GetAttrExpr() : Expr(Kind::GetAttr) {} ExprPtr object; std::string name; };
struct GetItemExpr : Expr { GetItemExpr() : Expr(Kind::GetItem) {} ExprPtr object, index; };
// Only as a GetItem index: [start:stop:step], each part optional.
struct SliceExpr : Expr { SliceExpr() : Expr(Kind::Slice) {} ExprPtr start, stop, step; };
struct CallExpr : Expr { CallExpr() : Expr(Kind::Call) {} ExprPtr callee; Args args; };
// input is null for the innermost filter of a {% filter %} block or {% set x | f %}: it applies to
// the block's text.
struct FilterExpr : Expr { FilterExpr() : Expr(Kind::Filter) {} ExprPtr input; std::string name; Args args; };
struct TestExpr : Expr {
  TestExpr() : Expr(Kind::Test) {}
  ExprPtr input;
  std::string name;
  Args args;
  bool negated = false;  // `is not`
};
struct UnaryExpr : Expr { UnaryExpr() : Expr(Kind::Unary) {} Op op = Op::Not; ExprPtr operand; };
struct BinaryExpr : Expr { BinaryExpr() : Expr(Kind::Binary) {} Op op = Op::Add; ExprPtr left, right; };
// a < b <= c: Python's chained comparison.
struct CompareExpr : Expr {
  CompareExpr() : Expr(Kind::Compare) {}
  ExprPtr first;
  std::vector<std::pair<Op, ExprPtr>> rest;
};
// `then if test else otherwise`; otherwise may be null (undefined when the test fails).
struct CondExpr : Expr { CondExpr() : Expr(Kind::Cond) {} ExprPtr test, then, otherwise; };

struct Stmt : Node {
  enum class Kind { Text, Print, If, For, Set, Macro, CallBlock, FilterBlock, With, Break, Continue };
  explicit Stmt(Kind k) : kind(k) {}
  virtual ~Stmt() = default;
  Kind kind;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// An assignment target: names (several: tuple unpacking), or one namespace attribute `ns.attr`.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;    // `a, b` (even with one name: `a,`)
  std::string attribute;  // set ns.attribute: names[0] is the namespace
};

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct TextStmt : Stmt { TextStmt() : Stmt(Kind::Text) {} std::string text; };
struct PrintStmt : Stmt { PrintStmt() : Stmt(Kind::Print) {} ExprPtr expr; };
struct IfStmt : Stmt {
  IfStmt() : Stmt(Kind::If) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};
struct ForStmt : Stmt {
  ForStmt() : Stmt(Kind::For) {}
  Target target;
  ExprPtr iterable, filter;  // filter: `for x in xs if cond` (may be null)
  Body body, otherwise;
};
// {% set t = value %}, or the block form {% set t | filters %}...{% endset %} (value null).
struct SetStmt : Stmt {
  SetStmt() : Stmt(Kind::Set) {}
  Target target;
  ExprPtr value, filter;
  Body body;
};
struct MacroStmt : Stmt { MacroStmt() : Stmt(Kind::Macro) {} std::string name; std::vector<Param> params; Body body; };
// {% call(params) macro(args) %}body{% endcall %}: the body is the macro's caller().
struct CallBlockStmt : Stmt {
  CallBlockStmt() : Stmt(Kind::CallBlock) {}
  ExprPtr call;  // a CallExpr
  std::vector<Param> params;
  Body body;
};
struct FilterBlockStmt : Stmt { FilterBlockStmt() : Stmt(Kind::FilterBlock) {} ExprPtr filter; Body body; };
struct WithStmt : Stmt {
  WithStmt() : Stmt(Kind::With) {}
  std::vector<std::pair<std::string, ExprPtr>> assignments;
  Body body;
};
struct BreakStmt : Stmt { BreakStmt() : Stmt(Kind::Break) {} };
struct ContinueStmt : Stmt { ContinueStmt() : Stmt(Kind::Continue) {} };

}  // namespace flashserve::jinja
