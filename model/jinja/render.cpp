#include "model/jinja/render.h"

#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

// The renderer recurses once per nested expression, statement and call; this bounds the stack
// whatever the template (the parser bounds syntax nesting, this adds macro recursion on top).
constexpr int kMaxRecursion = 600;

class MacroFn : public Callable {
 public:
  explicit MacroFn(const MacroStmt& m) : macro_(m) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return in.call_macro(macro_, args); }
  std::string name() const override { return macro_.name; }

 private:
  const MacroStmt& macro_;
};

// caller() inside a macro invoked by {% call %}: the call block's body, in the scope of the call.
class CallerFn : public Callable {
 public:
  CallerFn(const CallBlockStmt& block, std::weak_ptr<Frame> frame) : block_(block), frame_(std::move(frame)) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return in.call_caller(block_, frame_, args); }
  std::string name() const override { return "caller"; }

 private:
  const CallBlockStmt& block_;
  std::weak_ptr<Frame> frame_;  // weak: a caller() stored away must not keep its scope alive
};

void position(TemplateError& e, const Node& n) {
  if (!e.has_position()) e.set_position(n.line, n.column);
}

}  // namespace

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter& in) : in_(in) {
    if (++in_.depth_ > kMaxRecursion) {
      throw TemplateError(ErrorKind::Limit, "template limit reached: recursion deeper than " + std::to_string(kMaxRecursion));
    }
  }
  ~DepthGuard() { --in_.depth_; }
  Interpreter& in_;
};

// Makes `frame` current for its lifetime.
class Interpreter::FrameScope {
 public:
  FrameScope(Interpreter& in, std::shared_ptr<Frame> frame) : in_(in), saved_(std::move(in.frame_)) {
    in_.frame_ = std::move(frame);
  }
  ~FrameScope() { in_.frame_ = std::move(saved_); }

 private:
  Interpreter& in_;
  std::shared_ptr<Frame> saved_;
};

Interpreter::Interpreter(const Limits& limits, std::shared_ptr<Frame> root)
    : budget_(limits), root_(root), frame_(std::move(root)) {}

void Interpreter::render(const Body& body, std::string& out) { exec(body, out); }

Interpreter::Flow Interpreter::exec(const Body& body, std::string& out) {
  DepthGuard guard(*this);
  for (const StmtPtr& s : body) {
    const Flow f = exec_stmt(*s, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::capture(const Body& body) {
  std::string out;
  exec(body, out);
  return out;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, std::string& out) {
  budget_.spend(1);
  try {
    switch (s.kind) {
      case Stmt::Kind::Text: budget_.append(out, static_cast<const TextStmt&>(s).text); break;
      case Stmt::Kind::Print: append_str(out, eval(*static_cast<const PrintStmt&>(s).expr), budget_); break;
      case Stmt::Kind::If: {
        const auto& st = static_cast<const IfStmt&>(s);
        for (const auto& [test, body] : st.branches) {
          if (eval(*test).truthy()) return exec(body, out);
        }
        return exec(st.otherwise, out);
      }
      case Stmt::Kind::For: return exec_for(static_cast<const ForStmt&>(s), out);
      case Stmt::Kind::Set: exec_set(static_cast<const SetStmt&>(s)); break;
      case Stmt::Kind::Macro: {
        const auto& m = static_cast<const MacroStmt&>(s);
        frame_->vars[m.name] = Value::callable(std::make_shared<MacroFn>(m));
        break;
      }
      case Stmt::Kind::CallBlock: {
        const auto& st = static_cast<const CallBlockStmt&>(s);
        const auto& c = static_cast<const CallExpr&>(*st.call);
        const Value fn = eval(*c.callee);
        CallArgs args = eval_args(c.args);
        args.kwargs.emplace_back("caller", Value::callable(std::make_shared<CallerFn>(st, frame_)));
        append_str(out, call(fn, args), budget_);
        break;
      }
      case Stmt::Kind::FilterBlock: {
        const auto& st = static_cast<const FilterBlockStmt&>(s);
        const Value text = Value::string(capture(st.body));
        append_str(out, eval_filter(static_cast<const FilterExpr&>(*st.filter), &text), budget_);
        break;
      }
      case Stmt::Kind::With: {
        const auto& st = static_cast<const WithStmt&>(s);
        auto frame = std::make_shared<Frame>();
        frame->parent = frame_;
        for (const auto& [name, value] : st.assignments) frame->vars[name] = eval(*value);
        FrameScope scope(*this, std::move(frame));
        return exec(st.body, out);
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
  } catch (TemplateError& e) {
    position(e, s);
    throw;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.iterable), budget_);
  if (s.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      budget_.iteration();
      auto frame = std::make_shared<Frame>();
      frame->parent = frame_;
      FrameScope scope(*this, frame);
      assign(s.target, item);
      if (eval(*s.filter).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.otherwise, out);
  const int64_t n = int64_t(items.size());
  for (int64_t i = 0; i < n; ++i) {
    budget_.iteration();
    auto frame = std::make_shared<Frame>();
    frame->parent = frame_;
    FrameScope scope(*this, frame);
    assign(s.target, items[size_t(i)]);
    std::vector<std::pair<Value, Value>> loop = {
        {Value::string("index"), Value::integer(i + 1)},      {Value::string("index0"), Value::integer(i)},
        {Value::string("revindex"), Value::integer(n - i)},   {Value::string("revindex0"), Value::integer(n - i - 1)},
        {Value::string("first"), Value::boolean(i == 0)},     {Value::string("last"), Value::boolean(i == n - 1)},
        {Value::string("length"), Value::integer(n)},         {Value::string("depth"), Value::integer(1)},
        {Value::string("depth0"), Value::integer(0)}};
    if (i > 0) loop.emplace_back(Value::string("previtem"), items[size_t(i - 1)]);
    if (i + 1 < n) loop.emplace_back(Value::string("nextitem"), items[size_t(i + 1)]);
    frame->vars["loop"] = Value::dict(std::move(loop), budget_, /*keys_unique=*/true);
    if (exec(s.body, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::assign(const Target& t, const Value& v) {
  if (!t.attribute.empty()) {
    const Value ns = lookup(t.names[0]);
    if (!ns.is(Value::Kind::Namespace)) fail("cannot assign attribute on non-namespace object");
    if (v.holds_refs()) fail("a namespace attribute cannot hold a namespace, macro or function");
    for (auto& [k, val] : ns.ns().attrs) {
      if (k == t.attribute) {
        val = v;
        return;
      }
    }
    ns.ns().attrs.emplace_back(t.attribute, v);
    return;
  }
  if (!t.unpack) {
    frame_->vars[t.names[0]] = v;
    return;
  }
  const std::vector<Value> parts = iterate(v, budget_);
  if (parts.size() != t.names.size()) {
    fail(parts.size() > t.names.size() ? "too many values to unpack (expected " + std::to_string(t.names.size()) + ")"
                                       : "not enough values to unpack (expected " + std::to_string(t.names.size()) +
                                             ", got " + std::to_string(parts.size()) + ")");
  }
  for (size_t i = 0; i < parts.size(); ++i) frame_->vars[t.names[i]] = parts[i];
}

void Interpreter::exec_set(const SetStmt& s) {
  if (s.value) {
    assign(s.target, eval(*s.value));
    return;
  }
  Value text = Value::string(capture(s.body));
  if (s.filter) text = eval_filter(static_cast<const FilterExpr&>(*s.filter), &text);
  assign(s.target, text);
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

Value Interpreter::call(const Value& fn, const CallArgs& args) {
  if (fn.is_undefined()) fn.raise_undefined();
  if (!fn.is(Value::Kind::Callable)) fail("'" + fn.type_name() + "' object is not callable");
  return fn.fn().call(*this, args);
}

void Interpreter::bind_params(const std::vector<Param>& params, const CallArgs& args, Frame& frame) {
  std::vector<Value> varargs;
  std::vector<std::pair<Value, Value>> kwargs;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    if (const Value* v = args.get(i, p.name)) {
      frame.vars[p.name] = *v;
    } else if (p.default_value) {
      frame.vars[p.name] = eval(*p.default_value);  // in the new scope: defaults see earlier params
    } else {
      frame.vars[p.name] = Value::undefined("parameter '" + p.name + "' was not provided");
    }
  }
  for (size_t i = params.size(); i < args.args.size(); ++i) varargs.push_back(args.args[i]);
  for (const auto& [k, v] : args.kwargs) {
    bool is_param = false;
    for (const Param& p : params) is_param = is_param || p.name == k;
    if (k == "caller" && !is_param) {  // {% call %} passes its body so
      frame.vars["caller"] = v;
      continue;
    }
    if (!is_param) kwargs.emplace_back(Value::string(k), v);
  }
  frame.vars["varargs"] = Value::list(std::move(varargs), budget_, /*tuple=*/true);
  frame.vars["kwargs"] = Value::dict(std::move(kwargs), budget_, /*keys_unique=*/true);
}

namespace {

// One level of macro or caller() nesting, undone however the call ends.
class CallDepth {
 public:
  CallDepth(int& calls, int limit) : calls_(calls) {
    if (calls_ + 1 > limit) {
      throw TemplateError(ErrorKind::Limit, "template limit reached: macro calls nested deeper than " +
                                                std::to_string(limit));
    }
    ++calls_;
  }
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;
  ~CallDepth() { --calls_; }

 private:
  int& calls_;
};

}  // namespace

Value Interpreter::call_macro(const MacroStmt& m, const CallArgs& args) {
  const CallDepth depth(calls_, int(budget_.limits().max_depth));
  auto frame = std::make_shared<Frame>();
  frame->parent = root_;
  FrameScope scope(*this, frame);
  frame->vars[m.name] = Value::callable(std::make_shared<MacroFn>(m));
  bind_params(m.params, args, *frame);
  return Value::string(capture(m.body));
}

Value Interpreter::call_caller(const CallBlockStmt& block, const std::weak_ptr<Frame>& weak, const CallArgs& args) {
  std::shared_ptr<Frame> parent = weak.lock();
  if (!parent) fail("caller() called after its call block ended");
  const CallDepth depth(calls_, int(budget_.limits().max_depth));
  auto frame = std::make_shared<Frame>();
  frame->parent = std::move(parent);
  FrameScope scope(*this, frame);
  bind_params(block.params, args, *frame);
  return Value::string(capture(block.body));
}

CallArgs Interpreter::eval_args(const Args& a) {
  CallArgs out;
  for (const ExprPtr& e : a.positional) out.args.push_back(eval(*e));
  if (a.star) {
    for (Value& v : iterate(eval(*a.star), budget_)) out.args.push_back(std::move(v));
  }
  for (const auto& [k, e] : a.keyword) out.kwargs.emplace_back(k, eval(*e));
  if (a.star_star) {
    const Value d = eval(*a.star_star);
    if (!d.is(Value::Kind::Dict)) fail("argument after ** must be a mapping, not " + d.type_name());
    for (const auto& [k, v] : d.dict().items) {
      if (!k.is_string()) fail("keywords must be strings");
      out.kwargs.emplace_back(k.str(), v);
    }
  }
  return out;
}

Value Interpreter::eval_filter(const FilterExpr& f, const Value* block_text) {
  Value input;
  if (!f.input) {
    input = block_text ? *block_text : Value();
  } else if (f.input->kind == Expr::Kind::Filter) {
    input = eval_filter(static_cast<const FilterExpr&>(*f.input), block_text);
  } else {
    input = eval(*f.input);
  }
  try {
    return apply_filter(*this, f.name, input, eval_args(f.args));
  } catch (TemplateError& e) {
    position(e, f);
    throw;
  }
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(*this);
  budget_.spend(1);
  try {
    return eval_inner(e);
  } catch (TemplateError& err) {
    position(err, e);
    throw;
  }
}

Value Interpreter::eval_inner(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Const: return static_cast<const ConstExpr&>(e).value;
    case Expr::Kind::Name: return lookup(static_cast<const NameExpr&>(e).name);
    case Expr::Kind::List: {
      const auto& l = static_cast<const ListExpr&>(e);
      std::vector<Value> items;
      for (const ExprPtr& x : l.items) items.push_back(eval(*x));
      return Value::list(std::move(items), budget_, l.tuple);
    }
    case Expr::Kind::Dict: {
      std::vector<std::pair<Value, Value>> items;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) items.emplace_back(eval(*k), eval(*v));
      return Value::dict(std::move(items), budget_);
    }
    case Expr::Kind::GetAttr: {
      const auto& g = static_cast<const GetAttrExpr&>(e);
      return get_attribute(budget_, eval(*g.object), g.name);
    }
    case Expr::Kind::GetItem: {
      const auto& g = static_cast<const GetItemExpr&>(e);
      const Value obj = eval(*g.object);
      if (g.index->kind == Expr::Kind::Slice) {
        const auto& s = static_cast<const SliceExpr&>(*g.index);
        auto part = [&](const ExprPtr& p) { return p ? eval(*p) : Value::none(); };
        return slice(budget_, obj, part(s.start), part(s.stop), part(s.step));
      }
      return get_item(budget_, obj, eval(*g.index));
    }
    case Expr::Kind::Slice: fail("a slice outside []");
    case Expr::Kind::Call: {
      const auto& c = static_cast<const CallExpr&>(e);
      const Value fn = eval(*c.callee);
      return call(fn, eval_args(c.args));
    }
    case Expr::Kind::Filter: return eval_filter(static_cast<const FilterExpr&>(e), nullptr);
    case Expr::Kind::Test: {
      const auto& t = static_cast<const TestExpr&>(e);
      const Value input = eval(*t.input);
      return Value::boolean(apply_test(*this, t.name, input, eval_args(t.args)) != t.negated);
    }
    case Expr::Kind::Unary: {
      const auto& u = static_cast<const UnaryExpr&>(e);
      const Value v = eval(*u.operand);
      if (u.op == Op::Not) return Value::boolean(!v.truthy());
      return negate(v, u.op == Op::Neg);
    }
    case Expr::Kind::Binary: return eval_binary(static_cast<const BinaryExpr&>(e));
    case Expr::Kind::Compare: return Value::boolean(eval_compare(static_cast<const CompareExpr&>(e)));
    case Expr::Kind::Cond: {
      const auto& c = static_cast<const CondExpr&>(e);
      if (eval(*c.test).truthy()) return eval(*c.then);
      if (c.otherwise) return eval(*c.otherwise);
      return Value::undefined("the inline if-expression on line " + std::to_string(c.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  fail("unknown expression");
}

Value Interpreter::eval_binary(const BinaryExpr& b) {
  const Value left = eval(*b.left);
  if (b.op == Op::And) return left.truthy() ? eval(*b.right) : left;
  if (b.op == Op::Or) return left.truthy() ? left : eval(*b.right);
  const Value right = eval(*b.right);
  if (b.op == Op::Concat) {
    std::string s = to_str(left, budget_);
    append_str(s, right, budget_);
    return Value::string(std::move(s));
  }
  return arithmetic(b.op, left, right, budget_);
}

bool Interpreter::eval_compare(const CompareExpr& c) {
  Value left = eval(*c.first);
  for (const auto& [op, expr] : c.rest) {
    Value right = eval(*expr);
    bool ok = false;
    switch (op) {
      case Op::Eq: ok = equal(left, right, budget_); break;
      case Op::Ne: ok = !equal(left, right, budget_); break;
      case Op::Lt: ok = less(left, right, budget_); break;
      case Op::Gt: ok = less(right, left, budget_); break;
      case Op::Le: ok = less(left, right, budget_) || equal(left, right, budget_); break;
      case Op::Ge: ok = less(right, left, budget_) || equal(left, right, budget_); break;
      case Op::In: ok = contains(right, left, budget_); break;
      case Op::NotIn: ok = !contains(right, left, budget_); break;
      default: fail("not a comparison");
    }
    if (!ok) return false;
    left = std::move(right);
  }
  return true;
}

}  // namespace flashserve::jinja
