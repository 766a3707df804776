#include "model/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "model/jinja/text.h"

namespace flashserve::jinja {

TemplateError::TemplateError(ErrorKind kind, std::string message, int line, int column)
    : kind_(kind), message_(std::move(message)), line_(line), column_(column) {
  set_position(line, column);
}

void TemplateError::set_position(int line, int column) {
  line_ = line;
  column_ = column;
  full_ = line > 0 ? "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message_
                   : message_;
}

void fail(std::string message) { throw TemplateError(ErrorKind::Runtime, std::move(message)); }

namespace {
[[noreturn]] void limit(const std::string& what) {
  throw TemplateError(ErrorKind::Limit, "template limit reached: " + what);
}
}  // namespace

void Budget::spend(uint64_t steps) {
  work_ += steps;
  if (work_ > limits_.max_work) limit("too much work (max_work " + std::to_string(limits_.max_work) + ")");
}

void Budget::iteration() {
  if (++iterations_ > limits_.max_loop_iterations) {
    limit("too many loop iterations (max " + std::to_string(limits_.max_loop_iterations) + ")");
  }
  spend(1);
}

void Budget::check_size(size_t size) const {
  if (size > limits_.max_output_bytes) {
    limit("output or value larger than " + std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

void Budget::append(std::string& out, std::string_view piece) {
  check_size(out.size() + piece.size());
  spend(piece.size() / 64 + 1);
  out.append(piece);
}

Value Value::undefined(std::string hint) {
  return Value(Data(std::in_place_index<0>, std::make_shared<const std::string>(std::move(hint))));
}

Value Value::string(std::string s, bool markup) {
  return Value(Data(std::in_place_index<5>, std::make_shared<const Str>(Str{std::move(s), markup})));
}

namespace {
void check_depth(uint32_t depth, const Budget& budget) {
  if (depth > budget.limits().max_depth) {
    limit("values nested deeper than " + std::to_string(budget.limits().max_depth));
  }
}
}  // namespace

Value Value::list(std::vector<Value> items, Budget& budget, bool tuple) {
  budget.check_size(items.size());
  budget.spend(items.size() / 16 + 1);
  auto d = std::make_shared<ListData>();
  for (const Value& v : items) {
    d->depth = std::max(d->depth, v.depth() + 1);
    d->holds_refs = d->holds_refs || v.holds_refs();
  }
  check_depth(d->depth, budget);
  d->items = std::move(items);
  d->tuple = tuple;
  return Value(Data(std::in_place_index<6>, std::move(d)));
}

namespace {
void check_hashable(const Value& key) {
  switch (key.kind()) {
    case Value::Kind::List:
      if (key.list().tuple) {
        for (const Value& v : key.list().items) check_hashable(v);
        return;
      }
      [[fallthrough]];
    case Value::Kind::Dict:
    case Value::Kind::Namespace:
      fail("unhashable type: '" + key.type_name() + "'");
    default:
      return;
  }
}
}  // namespace

Value Value::dict(std::vector<std::pair<Value, Value>> items, Budget& budget, bool keys_unique) {
  budget.check_size(items.size());
  auto d = std::make_shared<DictData>();
  d->items.reserve(items.size());
  for (auto& [k, v] : items) {
    check_hashable(k);
    d->depth = std::max({d->depth, k.depth() + 1, v.depth() + 1});
    d->holds_refs = d->holds_refs || k.holds_refs() || v.holds_refs();
    Value* existing = nullptr;
    if (!keys_unique) {
      for (auto& [ek, ev] : d->items) {
        if (equal(ek, k, budget)) existing = &ev;
      }
    }
    if (existing) {
      *existing = std::move(v);
    } else {
      d->items.emplace_back(std::move(k), std::move(v));
    }
  }
  check_depth(d->depth, budget);
  return Value(Data(std::in_place_index<7>, std::move(d)));
}

Value Value::ns(std::shared_ptr<NamespaceData> data) { return Value(Data(std::in_place_index<8>, std::move(data))); }

Value Value::callable(std::shared_ptr<const Callable> fn) {
  return Value(Data(std::in_place_index<9>, std::move(fn)));
}

const std::string& Value::undefined_hint() const {
  static const std::string kNone;
  const auto& p = std::get<0>(data_);
  return p ? *p : kNone;
}

int64_t Value::as_int() const { return is(Kind::Bool) ? int64_t(as_bool()) : std::get<3>(data_); }

double Value::as_double() const { return is(Kind::Float) ? std::get<4>(data_) : double(as_int()); }

const void* Value::identity() const {
  switch (kind()) {
    case Kind::String: return std::get<5>(data_).get();
    case Kind::List: return std::get<6>(data_).get();
    case Kind::Dict: return std::get<7>(data_).get();
    case Kind::Namespace: return std::get<8>(data_).get();
    case Kind::Callable: return std::get<9>(data_).get();
    default: return nullptr;
  }
}

uint32_t Value::depth() const {
  if (is(Kind::List)) return list().depth;
  if (is(Kind::Dict)) return dict().depth;
  return 0;
}

bool Value::holds_refs() const {
  if (is(Kind::Namespace) || is(Kind::Callable)) return true;
  if (is(Kind::List)) return list().holds_refs;
  if (is(Kind::Dict)) return dict().holds_refs;
  return false;
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List: return !list().items.empty();
    case Kind::Dict: return !dict().items.empty();
    case Kind::Namespace:
    case Kind::Callable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list().tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Namespace: return "Namespace";
    case Kind::Callable: return "function";
  }
  return "object";
}

void Value::raise_undefined() const {
  const std::string& hint = undefined_hint();
  fail(hint.empty() ? "undefined value" : hint);
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return index < args.size() ? &args[index] : nullptr;
}

namespace {

// Python's exact comparison of an int with a float.
int compare_numbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  const double x = a.as_double(), y = b.as_double();
  if (std::isnan(x) || std::isnan(y)) return 2;  // unordered, unequal
  if (a.is_integral() && std::isfinite(y) && y >= -9.2e18 && y <= 9.2e18 && y == std::floor(y)) {
    const int64_t yi = int64_t(y);
    return a.as_int() < yi ? -1 : a.as_int() > yi ? 1 : 0;
  }
  if (b.is_integral() && std::isfinite(x) && x >= -9.2e18 && x <= 9.2e18 && x == std::floor(x)) {
    const int64_t xi = int64_t(x);
    return xi < b.as_int() ? -1 : xi > b.as_int() ? 1 : 0;
  }
  return x < y ? -1 : x > y ? 1 : 0;
}

}  // namespace

bool equal(const Value& a, const Value& b, Budget& budget) {
  budget.spend(1);
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::Undefined:
    case K::None: return true;
    case K::String: return a.str() == b.str();
    case K::List: {
      const ListData &x = a.list(), &y = b.list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equal(x.items[i], y.items[i], budget)) return false;
      }
      return true;
    }
    case K::Dict: {
      const DictData &x = a.dict(), &y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = dict_find(y, k, budget);
        if (!other || !equal(v, *other, budget)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool less(const Value& a, const Value& b, Budget& budget) {
  budget.spend(1);
  if (a.is_undefined()) a.raise_undefined();
  if (b.is_undefined()) b.raise_undefined();
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == -1;
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is(Value::Kind::List) && b.is(Value::Kind::List) && a.list().tuple == b.list().tuple) {
    const auto &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i], budget)) return less(x[i], y[i], budget);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

const Value* dict_find(const DictData& d, const Value& key, Budget& budget) {
  budget.spend(d.items.size() / 16 + 1);
  for (const auto& [k, v] : d.items) {
    if (k.is_string() != key.is_string()) continue;
    if (k.is_string() ? k.str() == key.str() : equal(k, key, budget)) return &v;
  }
  return nullptr;
}

const Value* dict_find(const DictData& d, std::string_view key) {
  for (const auto& [k, v] : d.items) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

bool contains(const Value& haystack, const Value& needle, Budget& budget) {
  switch (haystack.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!needle.is_string()) fail("'in <string>' requires string as left operand, not " + needle.type_name());
      budget.spend(haystack.str().size() / 64 + 1);
      return haystack.str().find(needle.str()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : haystack.list().items) {
        if (equal(v, needle, budget)) return true;
      }
      return false;
    case Value::Kind::Dict:
      check_hashable(needle);
      return dict_find(haystack.dict(), needle, budget) != nullptr;
    default: fail("argument of type '" + haystack.type_name() + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value& v, Budget& budget) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::List: budget.spend(v.list().items.size() / 16 + 1); return v.list().items;
    case Value::Kind::Dict:
      budget.spend(v.dict().items.size() / 16 + 1);
      for (const auto& [k, _] : v.dict().items) out.push_back(k);
      return out;
    case Value::Kind::String:
      budget.spend(v.str().size() / 16 + 1);
      for (std::string_view c : text::chars(v.str())) out.push_back(Value::string(std::string(c)));
      return out;
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

}  // namespace flashserve::jinja
