// Python's arithmetic on template values. Python integers never overflow; ours are 64-bit, so an
// overflow is an error rather than a wrong answer.
#include <cmath>

#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

const char* symbol(Op op) {
  switch (op) {
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::FloorDiv: return "//";
    case Op::Mod: return "%";
    case Op::Pow: return "**";
    default: return "?";
  }
}

[[noreturn]] void unsupported(Op op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + symbol(op) + ": '" + a.type_name() + "' and '" +
       b.type_name() + "'");
}

[[noreturn]] void overflow() { fail("integer overflow (values are limited to 64 bits)"); }

Value repeat(const Value& seq, int64_t times, Budget& budget) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.str();
    if (!s.empty() && uint64_t(times) > (uint64_t(1) << 62) / s.size()) budget.check_size(SIZE_MAX);
    budget.check_size(s.size() * size_t(times));
    budget.spend(s.size() * size_t(times) / 64 + 1);
    std::string out;
    out.reserve(s.size() * size_t(times));
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value::string(std::move(out), seq.is_markup());
  }
  const auto& items = seq.list().items;
  if (!items.empty() && uint64_t(times) > (uint64_t(1) << 62) / items.size()) budget.check_size(SIZE_MAX);
  budget.check_size(items.size() * size_t(times));
  std::vector<Value> out;
  out.reserve(items.size() * size_t(times));
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), budget, seq.list().tuple);
}

// Python's float divmod.
void float_divmod(double x, double y, double& div, double& mod) {
  if (y == 0) fail("float division by zero");
  mod = std::fmod(x, y);
  double d = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      d -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (d != 0) {
    div = std::floor(d);
    if (d - div > 0.5) div += 1.0;
  } else {
    div = std::copysign(0.0, x / y);
  }
}

Value int_power(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value::integer(result);
}

}  // namespace

Value arithmetic(Op op, const Value& a, const Value& b, Budget& budget) {
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  using K = Value::Kind;
  if (a.is_integral() && b.is_integral()) {
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case Op::Add: if (__builtin_add_overflow(x, y, &r)) overflow(); return Value::integer(r);
      case Op::Sub: if (__builtin_sub_overflow(x, y, &r)) overflow(); return Value::integer(r);
      case Op::Mul: if (__builtin_mul_overflow(x, y, &r)) overflow(); return Value::integer(r);
      case Op::Div:
        if (y == 0) fail("division by zero");
        return Value::number(double(x) / double(y));
      case Op::FloorDiv:
      case Op::Mod: {
        if (y == 0) fail("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) overflow();
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::integer(op == Op::FloorDiv ? q : m);
      }
      case Op::Pow:
        if (y >= 0) return int_power(x, y);
        if (x == 0) fail("0.0 cannot be raised to a negative power");
        return Value::number(std::pow(double(x), double(y)));
      default: break;
    }
  }
  if (a.is_number() && b.is_number()) {
    const double x = a.as_double(), y = b.as_double();
    double div = 0, mod = 0;
    switch (op) {
      case Op::Add: return Value::number(x + y);
      case Op::Sub: return Value::number(x - y);
      case Op::Mul: return Value::number(x * y);
      case Op::Div:
        if (y == 0) fail("float division by zero");
        return Value::number(x / y);
      case Op::FloorDiv: float_divmod(x, y, div, mod); return Value::number(div);
      case Op::Mod: float_divmod(x, y, div, mod); return Value::number(mod);
      case Op::Pow:
        if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) fail("a negative number raised to a fractional power is complex");
        return Value::number(std::pow(x, y));
      default: break;
    }
  }
  if (op == Op::Add && a.is_string() && b.is_string()) {
    // Markup + str escapes the str (and str + Markup too); the sum is Markup.
    const bool markup = a.is_markup() || b.is_markup();
    const std::string left = markup && !a.is_markup() ? html_escape(a.str()) : a.str();
    const std::string right = markup && !b.is_markup() ? html_escape(b.str()) : b.str();
    budget.check_size(left.size() + right.size());
    budget.spend((left.size() + right.size()) / 64 + 1);
    return Value::string(left + right, markup);
  }
  if (op == Op::Add && a.is(K::List) && b.is(K::List) && a.list().tuple == b.list().tuple) {
    budget.check_size(a.list().items.size() + b.list().items.size());
    std::vector<Value> items = a.list().items;
    items.insert(items.end(), b.list().items.begin(), b.list().items.end());
    return Value::list(std::move(items), budget, a.list().tuple);
  }
  if (op == Op::Mul && (a.is_string() || a.is(K::List)) && b.is_integral()) return repeat(a, b.as_int(), budget);
  if (op == Op::Mul && (b.is_string() || b.is(K::List)) && a.is_integral()) return repeat(b, a.as_int(), budget);
  if (op == Op::Mod && a.is_string()) fail("printf-style '%' formatting of strings is not supported");
  unsupported(op, a, b);
}

Value negate(const Value& v, bool minus) {
  if (v.is_undefined()) v.raise_undefined();
  if (v.is_integral()) {
    if (!minus) return Value::integer(v.as_int());
    if (v.as_int() == INT64_MIN) overflow();
    return Value::integer(-v.as_int());
  }
  if (v.is(Value::Kind::Float)) return Value::number(minus ? -v.as_double() : v.as_double());
  fail(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + v.type_name() + "'");
}

}  // namespace flashserve::jinja
