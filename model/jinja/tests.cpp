// jinja2's tests (`x is defined`, `x is string`, `x is equalto y`, ...), with Python's type rules:
// a bool is a number but not an integer, undefined is iterable, a dict is a sequence.
#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

const Value& operand(const CallArgs& a, const std::string& test) {
  const Value* v = a.get(0, "value");
  if (!v) fail("test '" + test + "' needs an argument");
  return *v;
}

bool same(const Value& a, const Value& b, Budget& budget) {
  if (a.kind() != b.kind()) return false;
  if (a.identity() || b.identity()) return a.identity() == b.identity();
  return equal(a, b, budget);  // scalars: Python interns None, bools and small ints
}

}  // namespace

bool apply_test(Interpreter& in, const std::string& name, const Value& v, const CallArgs& a) {
  using K = Value::Kind;
  Budget& budget = in.budget();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is(K::Bool);
  if (name == "true") return v.is(K::Bool) && v.as_bool();
  if (name == "false") return v.is(K::Bool) && !v.as_bool();
  if (name == "integer") return v.is(K::Int);
  if (name == "float") return v.is(K::Float);
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is(K::Dict);
  if (name == "iterable") return v.is(K::String) || v.is(K::List) || v.is(K::Dict) || v.is_undefined();
  if (name == "sequence") return v.is(K::String) || v.is(K::List) || v.is(K::Dict) || v.is_undefined();
  if (name == "callable") return v.is(K::Callable);
  if (name == "escaped") return v.is_markup();
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string& s = v.str();
    return name == "lower" ? text::lower(s) == s : text::upper(s) == s;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!v.is_integral()) fail("test '" + name + "' needs an integer");
    const int64_t x = v.as_int();
    if (name == "odd") return x % 2 != 0;
    if (name == "even") return x % 2 == 0;
    const Value& d = operand(a, name);
    if (!d.is_integral() || d.as_int() == 0) fail("divisibleby needs a non-zero integer");
    return d.as_int() == -1 || x % d.as_int() == 0;
  }
  if (name == "sameas") return same(v, operand(a, name), budget);
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, operand(a, name), budget);
  if (name == "ne" || name == "!=") return !equal(v, operand(a, name), budget);
  if (name == "lt" || name == "lessthan" || name == "<") return less(v, operand(a, name), budget);
  if (name == "gt" || name == "greaterthan" || name == ">") return less(operand(a, name), v, budget);
  if (name == "le" || name == "<=") return less(v, operand(a, name), budget) || equal(v, operand(a, name), budget);
  if (name == "ge" || name == ">=") return less(operand(a, name), v, budget) || equal(v, operand(a, name), budget);
  if (name == "in") return contains(operand(a, name), v, budget);
  fail("No test named '" + name + "'.");
}

}  // namespace flashserve::jinja
