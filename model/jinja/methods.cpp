// Attribute and item access as jinja2's ImmutableSandboxedEnvironment does it, Python's str / dict /
// list methods, and the global functions.
#include <algorithm>
#include <array>

#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

constexpr std::array kStrMethods = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper",
                                    "lower", "replace", "title", "capitalize", "find", "rfind", "count", "join",
                                    "splitlines", "format", "isdigit", "isalpha", "isalnum", "isspace", "islower",
                                    "isupper"};
constexpr std::array kDictMethods = {"items", "keys", "values", "get"};
constexpr std::array kListMethods = {"index", "count"};
// Methods that modify their object: the immutable sandbox refuses them.
constexpr std::array kDictMutators = {"pop", "popitem", "setdefault", "update", "clear"};
constexpr std::array kListMutators = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool in(const std::array<const char*, N>& names, const std::string& name) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return name == n; });
}

class Method : public Callable {
 public:
  Method(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return call_method(in, self_, name_, args); }
  std::string name() const override { return name_; }

 private:
  Value self_;
  std::string name_;
};

std::string object_name(const Value& v) { return v.is_none() ? "'None'" : "'" + v.type_name() + " object'"; }

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined(object_name(obj) + " has no attribute '" + name + "'");
}

Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
}

// The method `name` of obj, an unsafe marker, or null when Python has no such attribute.
bool method(const Value& obj, const std::string& name, Value& out) {
  using K = Value::Kind;
  if ((obj.is(K::String) && in(kStrMethods, name)) || (obj.is(K::Dict) && in(kDictMethods, name)) ||
      (obj.is(K::List) && in(kListMethods, name))) {
    out = Value::callable(std::make_shared<Method>(obj, name));
    return true;
  }
  if ((obj.is(K::Dict) && in(kDictMutators, name)) || (obj.is(K::List) && !obj.list().tuple && in(kListMutators, name))) {
    out = unsafe(obj, name);
    return true;
  }
  return false;
}

const Value* arg(const CallArgs& a, size_t i, std::string_view name = {}) { return a.get(i, name); }

const std::string* string_arg(const CallArgs& a, size_t i, const char* what) {
  const Value* v = arg(a, i);
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) fail(std::string(what) + " arg must be None or str, not " + v->type_name());
  return &v->str();
}

int64_t int_arg(const CallArgs& a, size_t i, int64_t fallback) {
  const Value* v = arg(a, i);
  if (!v || v->is_none()) return fallback;
  if (!v->is_integral()) fail("'" + v->type_name() + "' object cannot be interpreted as an integer");
  return v->as_int();
}

std::vector<Value> split(const std::string& s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    if (!from_right) {
      size_t start = 0, hit;
      while ((maxsplit < 0 || int64_t(parts.size()) < maxsplit) && (hit = s.find(*sep, start)) != std::string::npos) {
        parts.push_back(s.substr(start, hit - start));
        start = hit + sep->size();
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      std::vector<std::string> rev;
      while ((maxsplit < 0 || int64_t(rev.size()) < maxsplit) && end >= sep->size()) {
        const size_t hit = s.rfind(*sep, end - sep->size());
        if (hit == std::string::npos) break;
        rev.push_back(s.substr(hit + sep->size(), end - hit - sep->size()));
        end = hit;
      }
      rev.push_back(s.substr(0, end));
      parts.assign(rev.rbegin(), rev.rend());
    }
  } else {
    // Runs of whitespace; none at the ends.
    const std::vector<std::string_view> cs = text::chars(s);
    std::vector<std::pair<size_t, size_t>> words;  // char ranges
    for (size_t i = 0; i < cs.size();) {
      while (i < cs.size() && text::is_space(cs[i])) ++i;
      if (i == cs.size()) break;
      size_t j = i;
      while (j < cs.size() && !text::is_space(cs[j])) ++j;
      words.emplace_back(i, j);
      i = j;
    }
    auto bytes = [&](size_t from, size_t to) {
      const size_t b = size_t(cs[from].data() - s.data());
      return s.substr(b, size_t(cs[to - 1].data() + cs[to - 1].size() - s.data()) - b);
    };
    const size_t n = words.size();
    if (maxsplit >= 0 && size_t(maxsplit) < n && n > 0) {
      const size_t keep = size_t(maxsplit);
      if (!from_right) {
        for (size_t k = 0; k < keep; ++k) parts.push_back(bytes(words[k].first, words[k].second));
        parts.push_back(bytes(words[keep].first, cs.size()));  // the rest keeps its trailing spaces
      } else {
        parts.push_back(bytes(0, words[n - keep - 1].second));
        for (size_t k = n - keep; k < n; ++k) parts.push_back(bytes(words[k].first, words[k].second));
      }
    } else {
      for (const auto& [b, e] : words) parts.push_back(bytes(b, e));
    }
  }
  std::vector<Value> out;
  for (std::string& p : parts) out.push_back(Value::string(std::move(p)));
  return out;
}

// Code point index range [start, end) of s as byte offsets, Python's clamping of negatives.
std::pair<size_t, size_t> byte_range(const std::string& s, const CallArgs& a, size_t first) {
  const std::vector<std::string_view> cs = text::chars(s);
  const int64_t n = int64_t(cs.size());
  auto clamp = [&](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
  const int64_t b = clamp(int_arg(a, first, 0)), e = clamp(int_arg(a, first + 1, n));
  auto offset = [&](int64_t i) { return i >= n ? s.size() : size_t(cs[size_t(i)].data() - s.data()); };
  return {offset(b), std::max(offset(b), offset(e))};
}

bool affix(const std::string& s, const Value& which, const CallArgs& a, bool prefix, Budget& budget) {
  const auto [b, e] = byte_range(s, a, 1);
  const std::string_view view = std::string_view(s).substr(b, e - b);
  auto test = [&](const Value& v) {
    if (!v.is_string()) fail(std::string(prefix ? "startswith" : "endswith") + " first arg must be str or a tuple of str");
    return prefix ? view.starts_with(v.str()) : view.ends_with(v.str());
  };
  if (which.is(Value::Kind::List) && which.list().tuple) {
    budget.spend(which.list().items.size());
    return std::any_of(which.list().items.begin(), which.list().items.end(), test);
  }
  return test(which);
}

std::string replace(Budget& budget, const std::string& s, const std::string& old, const std::string& with, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    for (std::string_view ch : text::chars(s)) {
      if (count < 0 || done++ < count) budget.append(out, with);
      budget.append(out, ch);
    }
    if (count < 0 || done < count) budget.append(out, with);
    return out;
  }
  size_t start = 0, hit;
  while ((count < 0 || done < count) && (hit = s.find(old, start)) != std::string::npos) {
    budget.append(out, std::string_view(s).substr(start, hit - start));
    budget.append(out, with);
    start = hit + old.size();
    ++done;
  }
  budget.append(out, std::string_view(s).substr(start));
  return out;
}

// str.format with {} / {0} / {name} fields (conversions !s and !r; no format specs).
std::string format(Interpreter& in, const std::string& f, const CallArgs& a) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      else fail("Single '}' encountered in format string");
      in.budget().append(out, "}");
      continue;
    }
    if (c != '{') {
      in.budget().append(out, std::string_view(&f[i], 1));
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      in.budget().append(out, "{");
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    bool as_repr = false;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      as_repr = field.substr(bang) == "!r";
      if (!as_repr && field.substr(bang) != "!s") fail("unsupported conversion in format string");
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos || field.find('[') != std::string::npos) {
      fail("format specs and field attributes are not supported");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : size_t(std::min<unsigned long>(std::stoul(field.substr(0, 9)), 1u << 30));
      if (index >= a.args.size()) fail("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
      v = &a.args[index];
    } else {
      for (const auto& [k, val] : a.kwargs) {
        if (k == field) v = &val;
      }
      if (!v) fail("KeyError: '" + field + "'");
    }
    if (as_repr) append_repr(out, *v, in.budget());
    else append_str(out, *v, in.budget());
  }
  return out;
}

Value string_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& a) {
  Budget& budget = in.budget();
  const std::string& s = self.str();
  const bool m = self.is_markup();  // these methods keep Markup Markup, as markupsafe's do
  budget.spend(s.size() / 64 + 1);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const std::string* chars = string_arg(a, 0, name.c_str());
    return Value::string(text::strip(s, name != "rstrip", name != "lstrip", chars), m);
  }
  if (name == "split" || name == "rsplit") {
    const Value* sv = a.get(0, "sep");
    const std::string* sep = nullptr;
    if (sv && !sv->is_none()) {
      if (!sv->is_string()) fail("must be str or None, not " + sv->type_name());
      sep = &sv->str();
    }
    const Value* m = a.get(1, "maxsplit");
    const int64_t maxsplit = m && m->is_integral() ? m->as_int() : -1;
    return Value::list(split(s, sep, maxsplit, name == "rsplit"), budget);
  }
  if (name == "startswith" || name == "endswith") {
    const Value* which = arg(a, 0);
    if (!which) fail(name + "() takes at least 1 argument (0 given)");
    return Value::boolean(affix(s, *which, a, name == "startswith", budget));
  }
  if (name == "upper") return Value::string(text::upper(s), m);
  if (name == "lower") return Value::string(text::lower(s), m);
  if (name == "title") return Value::string(text::title(s), m);
  if (name == "capitalize") return Value::string(text::capitalize(s), m);
  if (name == "replace") {
    const Value *old = arg(a, 0), *with = arg(a, 1);
    if (!old || !with || !old->is_string() || !with->is_string()) fail("replace() arguments must be str");
    return Value::string(replace(budget, s, old->str(), with->str(), int_arg(a, 2, -1)), m);
  }
  if (name == "find" || name == "rfind" || name == "count") {
    const Value* sub = arg(a, 0);
    if (!sub || !sub->is_string()) fail(name + "() argument must be str");
    const auto [b, e] = byte_range(s, a, 1);
    const std::string_view view = std::string_view(s).substr(b, e - b);
    if (name == "count") {
      if (sub->str().empty()) return Value::integer(int64_t(text::char_count(view)) + 1);
      int64_t n = 0;
      for (size_t p = view.find(sub->str()); p != std::string_view::npos; p = view.find(sub->str(), p + sub->str().size())) ++n;
      return Value::integer(n);
    }
    const size_t hit = name == "find" ? view.find(sub->str()) : view.rfind(sub->str());
    if (hit == std::string_view::npos) return Value::integer(-1);
    return Value::integer(int64_t(text::char_count(std::string_view(s).substr(0, b + hit))));
  }
  if (name == "join") {
    const Value* items = arg(a, 0);
    if (!items) fail("join() takes exactly one argument");
    std::string out;
    bool first = true;
    for (const Value& v : iterate(*items, budget)) {
      if (!v.is_string()) fail("sequence item: expected str instance, " + v.type_name() + " found");
      if (!first) budget.append(out, s);
      first = false;
      budget.append(out, v.str());
    }
    return Value::string(std::move(out));
  }
  if (name == "splitlines") {
    std::vector<Value> lines;
    for (std::string& l : text::splitlines(s)) lines.push_back(Value::string(std::move(l)));
    return Value::list(std::move(lines), budget);
  }
  if (name == "format") return Value::string(format(in, s, a));
  // The is*() predicates, over code points (ASCII classes; other characters count as letters).
  const std::vector<std::string_view> cs = text::chars(s);
  auto all = [&](auto pred) { return Value::boolean(!cs.empty() && std::all_of(cs.begin(), cs.end(), pred)); };
  auto digit = [](std::string_view c) { return c.size() == 1 && c[0] >= '0' && c[0] <= '9'; };
  auto alpha = [](std::string_view c) { return c.size() > 1 || ((c[0] | 0x20) >= 'a' && (c[0] | 0x20) <= 'z'); };
  if (name == "isdigit") return all(digit);
  if (name == "isalpha") return all(alpha);
  if (name == "isalnum") return all([&](std::string_view c) { return digit(c) || alpha(c); });
  if (name == "isspace") return all([](std::string_view c) { return text::is_space(c); });
  const bool has_cased = std::any_of(cs.begin(), cs.end(), [](std::string_view c) { return text::is_cased(c); });
  if (name == "islower") return Value::boolean(has_cased && text::lower(s) == s);
  if (name == "isupper") return Value::boolean(has_cased && text::upper(s) == s);
  fail("'str' object has no attribute '" + name + "'");
}

}  // namespace

bool resolve_index(int64_t index, size_t size, size_t& out) {
  if (index < 0) index += int64_t(size);
  if (index < 0 || uint64_t(index) >= size) return false;
  out = size_t(index);
  return true;
}

std::string text_of(Interpreter& in, const Value& v) { return to_str(v, in.budget()); }

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value get_attribute(Budget& budget, const Value& obj, const std::string& name) {
  using K = Value::Kind;
  if (obj.is_undefined()) obj.raise_undefined();
  Value m;
  if (method(obj, name, m)) return m;
  if (obj.is(K::Dict)) {
    if (const Value* v = dict_find(obj.dict(), Value::string(name), budget)) return *v;
  } else if (obj.is(K::Namespace)) {
    for (const auto& [k, v] : obj.ns().attrs) {
      if (k == name) return v;
    }
  }
  return no_attribute(obj, name);
}

Value get_item(Budget& budget, const Value& obj, const Value& key) {
  using K = Value::Kind;
  if (obj.is_undefined()) obj.raise_undefined();
  size_t i = 0;
  if (obj.is(K::Dict)) {
    if (const Value* v = dict_find(obj.dict(), key, budget)) return *v;
  } else if (obj.is(K::List) && key.is_integral()) {
    if (resolve_index(key.as_int(), obj.list().items.size(), i)) return obj.list().items[i];
  } else if (obj.is(K::String) && key.is_integral()) {
    const std::vector<std::string_view> cs = text::chars(obj.str());
    if (resolve_index(key.as_int(), cs.size(), i)) return Value::string(std::string(cs[i]), obj.is_markup());
  }
  if (key.is_string()) {
    Value m;
    if (method(obj, key.str(), m)) return m;
    if (obj.is(K::Namespace)) return get_attribute(budget, obj, key.str());
    return no_attribute(obj, key.str());
  }
  std::string k;
  append_repr(k, key, budget);
  return Value::undefined(object_name(obj) + " has no element " + k);
}

Value slice(Budget& budget, const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  using K = Value::Kind;
  if (obj.is_undefined()) obj.raise_undefined();
  auto part = [](const Value& v, int64_t fallback) {
    if (v.is_none() || v.is_undefined()) return fallback;
    if (!v.is_integral()) fail("slice indices must be integers or None");
    return v.as_int();
  };
  const int64_t step = part(step_v, 1);
  if (step == 0) fail("slice step cannot be zero");
  std::vector<std::string_view> cs;
  if (obj.is_string()) cs = text::chars(obj.str());
  else if (!obj.is(K::List)) return Value::undefined(object_name(obj) + " cannot be sliced");
  const int64_t n = obj.is_string() ? int64_t(cs.size()) : int64_t(obj.list().items.size());
  auto clamp = [&](int64_t i) {
    if (i < 0) {
      i = i < -n ? -1 : i + n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  auto given = [](const Value& v) { return !v.is_none() && !v.is_undefined(); };
  const int64_t start = given(start_v) ? clamp(part(start_v, 0)) : (step < 0 ? n - 1 : 0);
  const int64_t stop = given(stop_v) ? clamp(part(stop_v, 0)) : (step < 0 ? -1 : n);
  std::vector<size_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    picks.push_back(size_t(i));
    if (step > 0 ? i > INT64_MAX - step : i < INT64_MIN - step) break;
    i += step;
  }
  budget.spend(picks.size() / 16 + 1);
  if (obj.is_string()) {
    std::string out;
    for (size_t p : picks) out.append(cs[p]);
    return Value::string(std::move(out), obj.is_markup());
  }
  std::vector<Value> items;
  for (size_t p : picks) items.push_back(obj.list().items[p]);
  return Value::list(std::move(items), budget, obj.list().tuple);
}

Value call_method(Interpreter& in, const Value& self, const std::string& name, const CallArgs& a) {
  Budget& budget = in.budget();
  if (self.is_string()) return string_method(in, self, name, a);
  if (self.is(Value::Kind::Dict)) {
    const DictData& d = self.dict();
    budget.spend(d.items.size() / 16 + 1);
    std::vector<Value> out;
    if (name == "get") {
      const Value* key = arg(a, 0);
      if (!key) fail("get expected at least 1 argument, got 0");
      if (const Value* v = dict_find(d, *key, budget)) return *v;
      const Value* fallback = arg(a, 1);
      return fallback ? *fallback : Value::none();
    }
    for (const auto& [k, v] : d.items) {
      if (name == "keys") out.push_back(k);
      else if (name == "values") out.push_back(v);
      else out.push_back(Value::list({k, v}, budget, /*tuple=*/true));
    }
    return Value::list(std::move(out), budget);
  }
  if (self.is(Value::Kind::List)) {
    const Value* x = arg(a, 0);
    if (!x) fail(name + "() takes exactly one argument (0 given)");
    int64_t count = 0;
    for (size_t i = 0; i < self.list().items.size(); ++i) {
      if (!equal(self.list().items[i], *x, budget)) continue;
      if (name == "index") return Value::integer(int64_t(i));
      ++count;
    }
    if (name == "index") fail("value is not in list");
    return Value::integer(count);
  }
  fail("'" + self.type_name() + "' object has no attribute '" + name + "'");
}

}  // namespace flashserve::jinja
