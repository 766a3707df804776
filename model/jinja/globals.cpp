// Global functions: jinja2's range, dict and namespace, and the two Hugging Face adds to chat
// templates, raise_exception(message) and strftime_now(format).
#include <ctime>
#include <functional>

#include "model/jinja/builtins.h"
#include "model/jinja/text.h"

namespace flashserve::jinja {
namespace {

// jinja2's sandbox refuses ranges longer than this.
constexpr int64_t kMaxRange = 100000;

class Builtin : public Callable {
 public:
  using Fn = std::function<Value(Interpreter&, const CallArgs&)>;
  Builtin(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  Value call(Interpreter& in, const CallArgs& args) const override { return fn_(in, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

Value range(Interpreter& in, const CallArgs& a) {
  for (const Value& v : a.args) {
    if (!v.is_integral()) fail("'" + v.type_name() + "' object cannot be interpreted as an integer");
  }
  if (a.args.empty() || a.args.size() > 3) fail("range expected 1 to 3 arguments");
  const int64_t start = a.args.size() == 1 ? 0 : a.args[0].as_int();
  const int64_t stop = a.args.size() == 1 ? a.args[0].as_int() : a.args[1].as_int();
  const int64_t step = a.args.size() == 3 ? a.args[2].as_int() : 1;
  if (step == 0) fail("range() arg 3 must not be zero");
  // Length computed in 128 bits: start and stop may be anywhere in int64.
  const __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
  const __int128 mag = step > 0 ? __int128(step) : -__int128(step);
  const __int128 len = span <= 0 ? 0 : (span + mag - 1) / mag;
  if (len > kMaxRange) {
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (" + std::to_string(kMaxRange) + ").");
  }
  std::vector<Value> out;
  for (int64_t i = 0; i < int64_t(len); ++i) out.push_back(Value::integer(int64_t(start + __int128(i) * step)));
  return Value::list(std::move(out), in.budget());
}

// Entries of dict(...) / namespace(...): positional mappings, then keyword arguments.
std::vector<std::pair<std::string, Value>> entries(Interpreter& in, const CallArgs& a, const char* fn) {
  std::vector<std::pair<std::string, Value>> out;
  auto put = [&](std::string k, Value v) {
    for (auto& [ek, ev] : out) {
      if (ek == k) {
        ev = std::move(v);
        return;
      }
    }
    in.budget().check_size(out.size() + 1);
    out.emplace_back(std::move(k), std::move(v));
  };
  for (const Value& m : a.args) {
    if (!m.is(Value::Kind::Dict)) fail(std::string(fn) + "() positional arguments must be mappings");
    for (const auto& [k, v] : m.dict().items) {
      if (!k.is_string()) fail(std::string(fn) + "() keys must be strings");
      put(k.str(), v);
    }
  }
  for (const auto& [k, v] : a.kwargs) put(k, v);
  return out;
}

Value make_dict(Interpreter& in, const CallArgs& a) {
  std::vector<std::pair<Value, Value>> items;
  for (auto& [k, v] : entries(in, a, "dict")) items.emplace_back(Value::string(std::move(k)), std::move(v));
  return Value::dict(std::move(items), in.budget(), /*keys_unique=*/true);
}

Value make_namespace(Interpreter& in, const CallArgs& a) {
  auto ns = std::make_shared<NamespaceData>();
  ns->attrs = entries(in, a, "namespace");
  for (const auto& [k, v] : ns->attrs) {
    if (v.holds_refs()) fail("a namespace attribute cannot hold a namespace, macro or function");
  }
  return Value::ns(std::move(ns));
}

Value raise_exception(Interpreter& in, const CallArgs& a) {
  const Value* msg = a.get(0, "message");
  throw TemplateError(ErrorKind::Raised, msg ? text_of(in, *msg) : std::string());
}

// datetime.now().strftime(format): the C library's strftime, as CPython uses on Linux.
Value strftime_now(Interpreter& in, const CallArgs& a) {
  const Value* f = a.get(0, "format");
  if (!f || !f->is_string()) fail("strftime_now() argument must be str");
  const std::string& format = f->str();
  if (format.size() > 1024) fail("strftime_now() format longer than 1024 bytes");
  if (format.find('\0') != std::string::npos) fail("embedded null character");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(format.size() * 64 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
  if (n == 0 && !format.empty()) return Value::string("");
  out.resize(n);
  in.budget().spend(n / 64 + 1);
  return Value::string(std::move(out));
}

void define(Frame& root, const std::string& name, Builtin::Fn fn) {
  root.vars[name] = Value::callable(std::make_shared<Builtin>(name, std::move(fn)));
}

}  // namespace

void add_globals(Frame& root) {
  define(root, "range", range);
  define(root, "dict", make_dict);
  define(root, "namespace", make_namespace);
  define(root, "raise_exception", raise_exception);
  define(root, "strftime_now", strftime_now);
}

}  // namespace flashserve::jinja
