// jinja2's filters, as Hugging Face's environment has them (tojson replaced by theirs:
// json.dumps with ensure_ascii=False). Filters that return generators in jinja2 (map, select,
// selectattr, ...) return lists here, which print and compare the same once a template lists them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

const Value* opt(const CallArgs& a, size_t i, std::string_view name) { return a.get(i, name); }

bool flag(const CallArgs& a, size_t i, std::string_view name, bool fallback = false) {
  const Value* v = opt(a, i, name);
  return v ? v->truthy() : fallback;
}

// jinja2's attribute getter: "a.b.0" looks up each part as an item (then attribute).
Value lookup_path(Budget& budget, const Value& item, const Value& path) {
  if (!path.is_string()) return get_item(budget, item, path);
  Value v = item;
  const std::string& p = path.str();
  size_t start = 0;
  while (true) {
    const size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.size() < 18 &&
                         std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(budget, v, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

// Sort keys: case-folded strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  return !case_sensitive && v.is_string() ? Value::string(text::lower(v.str())) : v;
}

std::vector<Value> sorted(Budget& budget, std::vector<Value> items, const Value* attribute, bool case_sensitive, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;  // key, item
  for (Value& v : items) {
    keyed.emplace_back(sort_key(attribute ? lookup_path(budget, v, *attribute) : v, case_sensitive), std::move(v));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? less(y.first, x.first, budget) : less(x.first, y.first, budget);
  });
  std::vector<Value> out;
  for (auto& [k, v] : keyed) out.push_back(std::move(v));
  return out;
}

// select / reject / selectattr / rejectattr.
Value select(Interpreter& in, const Value& input, const CallArgs& a, bool with_attribute, bool keep) {
  const Value* attribute = with_attribute ? opt(a, 0, "attribute") : nullptr;
  if (with_attribute && !attribute) fail("selectattr/rejectattr need an attribute");
  const size_t first = with_attribute ? 1 : 0;
  CallArgs test_args;
  std::string test;
  if (a.args.size() > first) {
    if (!a.args[first].is_string()) fail("the test name must be a string");
    test = a.args[first].str();
    test_args.args.assign(a.args.begin() + long(first) + 1, a.args.end());
  }
  std::vector<Value> out;
  if (!input.truthy()) return Value::list({}, in.budget());  // jinja2 yields nothing for a falsy input
  for (const Value& item : iterate(input, in.budget())) {
    in.budget().iteration();
    const Value v = attribute ? lookup_path(in.budget(), item, *attribute) : item;
    const bool pass = test.empty() ? v.truthy() : apply_test(in, test, v, test_args);
    if (pass == keep) out.push_back(item);
  }
  return Value::list(std::move(out), in.budget());
}

Value map(Interpreter& in, const Value& input, const CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  for (const auto& [k, v] : a.kwargs) {
    if (k == "attribute") attribute = &v;
  }
  CallArgs filter_args;
  std::string filter;
  if (!attribute) {
    if (a.args.empty() || !a.args[0].is_string()) fail("map needs a filter name or attribute=");
    filter = a.args[0].str();
    filter_args.args.assign(a.args.begin() + 1, a.args.end());
    filter_args.kwargs = a.kwargs;
  }
  const Value* fallback = opt(a, 99, "default");
  if (!input.truthy()) return Value::list({}, in.budget());  // as jinja2: nothing for a falsy input
  for (const Value& item : iterate(input, in.budget())) {
    in.budget().iteration();
    if (attribute) {
      Value v = lookup_path(in.budget(), item, *attribute);
      out.push_back(v.is_undefined() && fallback ? *fallback : v);
    } else {
      out.push_back(apply_filter(in, filter, item, filter_args));
    }
  }
  return Value::list(std::move(out), in.budget());
}

Value tojson(Interpreter& in, const Value& input, const CallArgs& a) {
  JsonOptions o;
  o.ensure_ascii = flag(a, 0, "ensure_ascii");
  if (const Value* indent = opt(a, 1, "indent"); indent && !indent->is_none()) {
    o.pretty = true;
    if (indent->is_string()) o.indent = indent->str();
    else if (indent->is_integral()) o.indent = std::string(size_t(std::clamp<int64_t>(indent->as_int(), 0, 64)), ' ');
    else fail("tojson indent must be an int or a string");
    o.item_separator = ",";
  }
  if (const Value* sep = opt(a, 2, "separators"); sep && !sep->is_none()) {
    if (!sep->is(Value::Kind::List) || sep->list().items.size() != 2 || !sep->list().items[0].is_string() ||
        !sep->list().items[1].is_string()) {
      fail("tojson separators must be two strings");
    }
    o.item_separator = sep->list().items[0].str();
    o.key_separator = sep->list().items[1].str();
  }
  o.sort_keys = flag(a, 3, "sort_keys");
  std::string out;
  append_json(out, input, o, in.budget());
  return Value::string(std::move(out));
}

// jinja2's indent: every line but the first (and blank ones unless `blank`) gets the indent.
Value indent(Interpreter& in, const Value& input, const CallArgs& a) {
  const Value* width = opt(a, 0, "width");
  std::string pad = "    ";
  if (width && width->is_string()) pad = width->str();
  else if (width && width->is_integral()) pad = std::string(size_t(std::clamp<int64_t>(width->as_int(), 0, 256)), ' ');
  const bool first = flag(a, 1, "first"), blank = flag(a, 2, "blank");
  const std::vector<std::string> lines = text::splitlines(text_of(in, input) + "\n");
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) in.budget().append(out, "\n");
    if ((i > 0 || first) && (blank || !lines[i].empty())) in.budget().append(out, pad);
    in.budget().append(out, lines[i]);
  }
  return Value::string(std::move(out));
}

Value round(const Value& v, const CallArgs& a) {
  if (!v.is_number()) fail("round() needs a number, not " + v.type_name());
  const int64_t precision = std::clamp<int64_t>(opt(a, 0, "precision") && opt(a, 0, "precision")->is_integral()
                                                    ? opt(a, 0, "precision")->as_int() : 0, -300, 300);
  const Value* method = opt(a, 1, "method");
  const std::string how = method && method->is_string() ? method->str() : "common";
  if (how != "common" && how != "ceil" && how != "floor") fail("method must be common, ceil or floor");
  if (how == "common" && v.is_integral() && precision >= 0) return Value::integer(v.as_int());
  const double x = v.as_double();
  if (how == "common" && precision >= 0 && std::isfinite(x)) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", int(std::min<int64_t>(precision, 100)), x);  // correctly rounded
    return Value::number(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, double(precision));
  const double y = x * scale;
  return Value::number((how == "ceil" ? std::ceil(y) : how == "floor" ? std::floor(y) : std::nearbyint(y)) / scale);
}

Value to_int(Interpreter& in, const Value& v, const CallArgs& a) {
  const Value* fallback = opt(a, 0, "default");
  const int64_t base = opt(a, 1, "base") && opt(a, 1, "base")->is_integral() ? opt(a, 1, "base")->as_int() : 10;
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is(Value::Kind::Float) && std::isfinite(v.as_double()) && std::fabs(v.as_double()) < 9.2e18) {
    return Value::integer(int64_t(v.as_double()));
  }
  if (v.is_string() && base >= 2 && base <= 36) {
    std::string s = text::strip(v.str(), true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    errno = 0;
    char* end = nullptr;
    const long long r = std::strtoll(s.c_str(), &end, int(base));
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value::integer(r);
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value::integer(int64_t(d));
  }
  (void)in;
  return fallback ? *fallback : Value::integer(0);
}

Value to_float(const Value& v, const CallArgs& a) {
  const Value* fallback = opt(a, 0, "default");
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    std::string s = text::strip(v.str(), true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && s.find_first_of("xXpP") == std::string::npos) return Value::number(d);
  }
  return fallback ? *fallback : Value::number(0.0);
}

Value length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value::integer(0);
    case Value::Kind::String: return Value::integer(int64_t(text::char_count(v.str())));
    case Value::Kind::List: return Value::integer(int64_t(v.list().items.size()));
    case Value::Kind::Dict: return Value::integer(int64_t(v.dict().items.size()));
    default: fail("object of type '" + v.type_name() + "' has no len()");
  }
}

// min / max / sum over the items (or their attribute).
Value aggregate(Interpreter& in, const std::string& name, const Value& input, const CallArgs& a) {
  Budget& budget = in.budget();
  const Value* attribute = opt(a, name == "sum" ? 0 : 1, "attribute");
  std::vector<Value> items = iterate(input, budget);
  if (attribute) {
    for (Value& v : items) v = lookup_path(budget, v, *attribute);
  }
  if (name == "sum") {
    const Value* start = opt(a, 1, "start");
    Value total = start ? *start : Value::integer(0);
    for (const Value& v : items) total = arithmetic(Op::Add, total, v, budget);
    return total;
  }
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  const bool case_sensitive = flag(a, 0, "case_sensitive");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value x = sort_key(items[i], case_sensitive), b = sort_key(items[best], case_sensitive);
    if (name == "min" ? less(x, b, budget) : less(b, x, budget)) best = i;
  }
  return items[best];
}

}  // namespace

Value apply_filter(Interpreter& in, const std::string& name, const Value& v, const CallArgs& a) {
  Budget& budget = in.budget();
  if (name == "trim") {
    const Value* chars = opt(a, 0, "chars");
    return Value::string(text::strip(text_of(in, v), true, true, chars && chars->is_string() ? &chars->str() : nullptr),
                         v.is_markup());
  }
  if (name == "length" || name == "count") return length(v);
  // Markup stays Markup through these (markupsafe wraps str's methods).
  if (name == "upper") return Value::string(text::upper(text_of(in, v)), v.is_markup());
  if (name == "lower") return Value::string(text::lower(text_of(in, v)), v.is_markup());
  if (name == "capitalize") return Value::string(text::capitalize(text_of(in, v)), v.is_markup());
  if (name == "title") {
    // jinja2's title: a word starts after whitespace, '-' or an opening bracket.
    const std::string s = text_of(in, v);
    std::string out;
    bool start = true;
    for (std::string_view ch : text::chars(s)) {
      out += start ? text::upper(ch) : text::lower(ch);
      start = ch == "-" || ch == "(" || ch == "{" || ch == "[" || ch == "<" || text::is_space(ch);
    }
    return Value::string(std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value* fallback = opt(a, 0, "default_value");
    if (v.is_undefined() || (flag(a, 1, "boolean") && !v.truthy())) return fallback ? *fallback : Value::string("");
    return v;
  }
  if (name == "string") return v.is_string() ? v : Value::string(text_of(in, v));
  if (name == "safe") return v.is_markup() ? v : Value::string(text_of(in, v), /*markup=*/true);
  if (name == "e" || name == "escape") return v.is_markup() ? v : Value::string(html_escape(text_of(in, v)), true);
  if (name == "join") {
    const Value* sep = opt(a, 0, "d");
    const Value* attribute = opt(a, 1, "attribute");
    const std::string separator = sep ? text_of(in, *sep) : "";
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v, budget)) {
      if (!first) budget.append(out, separator);
      first = false;
      append_str(out, attribute ? lookup_path(budget, item, *attribute) : item, budget);
    }
    return Value::string(std::move(out));
  }
  if (name == "tojson") return tojson(in, v, a);
  if (name == "items") {
    if (v.is_undefined()) return Value::list({}, budget);
    if (!v.is(Value::Kind::Dict)) fail("Can only get item pairs from a mapping.");
    return call_method(in, v, "items", {});
  }
  if (name == "list") return Value::list(iterate(v, budget), budget);
  if (name == "first" || name == "last") {
    const std::vector<Value> items = iterate(v, budget);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "select" || name == "reject") return select(in, v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select(in, v, a, true, name == "selectattr");
  if (name == "map") return map(in, v, a);
  if (name == "int") return to_int(in, v, a);
  if (name == "float") return to_float(v, a);
  if (name == "replace") {
    CallArgs m;
    m.args = {opt(a, 0, "old") ? *opt(a, 0, "old") : Value(), opt(a, 1, "new") ? *opt(a, 1, "new") : Value()};
    if (const Value* count = opt(a, 2, "count"); count && !count->is_none()) m.args.push_back(*count);
    return call_method(in, Value::string(text_of(in, v)), "replace", m);
  }
  if (name == "indent") return indent(in, v, a);
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string_view> cs = text::chars(v.str());
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out.append(*it);
      return Value::string(std::move(out));
    }
    std::vector<Value> items = iterate(v, budget);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items), budget);
  }
  if (name == "sort") {
    return Value::list(sorted(budget, iterate(v, budget), opt(a, 2, "attribute"), flag(a, 1, "case_sensitive"),
                              flag(a, 0, "reverse")),
                       budget);
  }
  if (name == "unique") {
    const bool case_sensitive = flag(a, 0, "case_sensitive");
    const Value* attribute = opt(a, 1, "attribute");
    std::vector<Value> out, seen;
    for (const Value& item : iterate(v, budget)) {
      const Value key = sort_key(attribute ? lookup_path(budget, item, *attribute) : item, case_sensitive);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key, budget); })) continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::list(std::move(out), budget);
  }
  if (name == "dictsort") {
    if (!v.is(Value::Kind::Dict)) fail("dictsort needs a mapping");
    const Value* by = opt(a, 1, "by");
    const bool by_value = by && by->is_string() && by->str() == "value";
    if (by && !(by->is_string() && (by->str() == "key" || by->str() == "value"))) fail("You can only sort by either \"key\" or \"value\"");
    std::vector<Value> pairs;
    for (const auto& [k, val] : v.dict().items) pairs.push_back(Value::list({k, val}, budget, /*tuple=*/true));
    const Value index = Value::integer(by_value ? 1 : 0);
    return Value::list(sorted(budget, std::move(pairs), &index, flag(a, 0, "case_sensitive"), flag(a, 2, "reverse")), budget);
  }
  if (name == "round") return round(v, a);
  if (name == "abs") {
    if (!v.is_number()) fail("bad operand type for abs(): '" + v.type_name() + "'");
    if (v.is(Value::Kind::Float)) return Value::number(std::fabs(v.as_double()));
    return v.as_int() < 0 ? negate(v, true) : Value::integer(v.as_int());
  }
  if (name == "sum" || name == "min" || name == "max") return aggregate(in, name, v, a);
  fail("No filter named '" + name + "'.");
}

}  // namespace flashserve::jinja
