// Values of the Jinja subset, with Python's semantics where chat templates rely on them
// (truthiness, ==, <, str()), the errors every part of the engine throws, and the limits that keep
// an untrusted template from crashing, hanging or exhausting memory.
#pragma once
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace flashserve::jinja {

enum class ErrorKind {
  Syntax,   // the template does not parse
  Runtime,  // an operation failed while rendering (as jinja2 would fail)
  Limit,    // a limit of `Limits` was reached
  Raised,   // the template called raise_exception(message)
};

// Every failure of the engine. line/column are 1-based positions in the template source (with its
// line breaks normalised to "\n"), 0 when unknown.
class TemplateError : public std::exception {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0, int column = 0);
  const char* what() const noexcept override { return full_.c_str(); }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }
  int column() const { return column_; }
  bool has_position() const { return line_ > 0; }
  void set_position(int line, int column);

 private:
  ErrorKind kind_;
  std::string message_, full_;
  int line_, column_;
};

[[noreturn]] void fail(std::string message);  // a Runtime error, positioned by the renderer

struct Limits {
  size_t max_output_bytes = size_t(16) << 20;  // the rendered text, and any one string or container
  uint32_t max_depth = 64;                     // nested values, nested macro calls
  uint64_t max_loop_iterations = 1'000'000;    // all loops of one render together
  uint64_t max_work = 200'000'000;             // steps: nodes evaluated, elements visited
};

// What one render may still spend. Checked before anything grows.
class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  const Limits& limits() const { return limits_; }
  void spend(uint64_t steps);
  void iteration();
  // Throws if a string or container of `size` bytes/entries would pass the output limit.
  void check_size(size_t size) const;
  void append(std::string& out, std::string_view piece);  // out += piece, checked first

 private:
  Limits limits_;
  uint64_t work_ = 0, iterations_ = 0;
};

class Value;
class Callable;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
  uint32_t depth = 1;       // 1 + the deepest item's depth
  bool holds_refs = false;  // holds a namespace or a callable, somewhere inside
};

// A Python dict: insertion-ordered, keys unique under Python ==.
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  uint32_t depth = 1;
  bool holds_refs = false;
};

// namespace(): the one mutable object. It never holds a namespace or a callable (checked on
// assignment), so no value can reach itself and reference counting frees everything.
struct NamespaceData {
  std::vector<std::pair<std::string, Value>> attrs;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Value() = default;  // undefined
  static Value undefined(std::string hint);  // hint: the error raised when it is used
  static Value none() { return Value(Data(std::in_place_index<1>)); }
  static Value boolean(bool b) { return Value(Data(std::in_place_index<2>, b)); }
  static Value integer(int64_t i) { return Value(Data(std::in_place_index<3>, i)); }
  static Value number(double d) { return Value(Data(std::in_place_index<4>, d)); }
  // markup: a string marked safe (jinja2's Markup, from |safe or |escape): `+` HTML-escapes a plain
  // string added to it, as markupsafe does.
  static Value string(std::string s, bool markup = false);
  // Containers check the depth limit; dict() keeps the last value of a repeated key.
  static Value list(std::vector<Value> items, Budget& budget, bool tuple = false);
  // keys_unique: the caller guarantees no two keys are equal (skips the quadratic check).
  static Value dict(std::vector<std::pair<Value, Value>> items, Budget& budget, bool keys_unique = false);
  static Value ns(std::shared_ptr<NamespaceData> data);
  static Value callable(std::shared_ptr<const Callable> fn);

  Kind kind() const { return Kind(data_.index()); }
  bool is(Kind k) const { return kind() == k; }
  bool is_undefined() const { return is(Kind::Undefined); }
  bool is_none() const { return is(Kind::None); }
  bool is_string() const { return is(Kind::String); }
  bool is_number() const { return is(Kind::Bool) || is(Kind::Int) || is(Kind::Float); }
  bool is_integral() const { return is(Kind::Bool) || is(Kind::Int); }  // Python: bool is an int

  const std::string& undefined_hint() const;
  bool as_bool() const { return std::get<2>(data_); }
  int64_t as_int() const;  // Bool or Int
  double as_double() const;  // any number
  const std::string& str() const { return std::get<5>(data_)->text; }
  bool is_markup() const { return is(Kind::String) && std::get<5>(data_)->markup; }
  const ListData& list() const { return *std::get<6>(data_); }
  const DictData& dict() const { return *std::get<7>(data_); }
  NamespaceData& ns() const { return *std::get<8>(data_); }
  const Callable& fn() const { return *std::get<9>(data_); }
  const void* identity() const;  // for `is sameas` on shared objects

  uint32_t depth() const;     // 0 for scalars
  bool holds_refs() const;    // namespace or callable, itself or inside

  // Python truthiness; undefined is false.
  bool truthy() const;
  // Python's type name, for error messages ("str", "NoneType", "dict", ...).
  std::string type_name() const;
  // Throws the UndefinedError jinja2 raises when an undefined value is used.
  [[noreturn]] void raise_undefined() const;

 private:
  struct Str {
    std::string text;
    bool markup = false;
  };
  using Data = std::variant<std::shared_ptr<const std::string>, std::monostate, bool, int64_t, double,
                            std::shared_ptr<const Str>, std::shared_ptr<const ListData>,
                            std::shared_ptr<const DictData>, std::shared_ptr<NamespaceData>,
                            std::shared_ptr<const Callable>>;
  explicit Value(Data d) : data_(std::move(d)) {}
  Data data_;
};

// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // Argument `name`, or positional `index`; null when given neither way.
  const Value* get(size_t index, std::string_view name) const;
};

class Interpreter;

// Macros, caller(), bound methods and global functions.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Interpreter& in, const CallArgs& args) const = 0;
  virtual std::string name() const = 0;
};

// Python == (1 == 1.0 == True, [1] != (1,), dicts compare unordered).
bool equal(const Value& a, const Value& b, Budget& budget);
// Python <; throws a Runtime error for types Python cannot order.
bool less(const Value& a, const Value& b, Budget& budget);
// `needle in haystack`, as Python evaluates it.
bool contains(const Value& haystack, const Value& needle, Budget& budget);
// A dict's entry for `key`, or null.
const Value* dict_find(const DictData& d, const Value& key, Budget& budget);
const Value* dict_find(const DictData& d, std::string_view key);

// The items `for x in v` visits (dict: keys, string: characters, undefined: none); throws for
// values Python cannot iterate.
std::vector<Value> iterate(const Value& v, Budget& budget);

}  // namespace flashserve::jinja
