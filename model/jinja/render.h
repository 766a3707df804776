// Runs a parsed template: scopes (a frame per loop iteration, macro call and with block, as
// jinja2 scopes them), macros and caller(), loops with `loop`, and the limits of `Budget`.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>

#include "model/jinja/ast.h"
#include "model/jinja/value.h"

namespace flashserve::jinja {

struct Frame {
  std::shared_ptr<Frame> parent;
  std::unordered_map<std::string, Value> vars;
};

class Interpreter {
 public:
  // `root` holds the globals and the render's variables; top-level {% set %} writes there.
  Interpreter(const Limits& limits, std::shared_ptr<Frame> root);

  Budget& budget() { return budget_; }
  void render(const Body& body, std::string& out);

  // For callables.
  Value call(const Value& fn, const CallArgs& args);
  Value call_macro(const MacroStmt& macro, const CallArgs& args);
  Value call_caller(const CallBlockStmt& block, const std::weak_ptr<Frame>& frame, const CallArgs& args);

 private:
  enum class Flow { Normal, Break, Continue };
  struct DepthGuard;
  class FrameScope;

  Flow exec(const Body& body, std::string& out);
  Flow exec_stmt(const Stmt& s, std::string& out);
  Flow exec_for(const ForStmt& s, std::string& out);
  void exec_set(const SetStmt& s);
  void assign(const Target& t, const Value& v);
  std::string capture(const Body& body);

  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value eval_binary(const BinaryExpr& e);
  bool eval_compare(const CompareExpr& e);
  Value eval_filter(const FilterExpr& e, const Value* block_text);
  CallArgs eval_args(const Args& a);
  Value lookup(const std::string& name) const;
  // Binds a macro's or caller's parameters in `frame` (defaults evaluated there), with varargs and
  // kwargs for the rest.
  void bind_params(const std::vector<Param>& params, const CallArgs& args, Frame& frame);

  Budget budget_;
  std::shared_ptr<Frame> root_, frame_;
  int depth_ = 0, calls_ = 0;
};

}  // namespace flashserve::jinja
