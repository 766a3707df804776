// Typed access to GGUF metadata: conversions between the stored type and the one asked for, and
// errors that name the file, the key, its type and the type expected.
#include <limits>

#include "model/gguf.h"

namespace flashserve {
namespace {

const char* type_name(GgufType t) {
  static constexpr const char* kNames[] = {"U8",   "I8",     "U16",   "I16", "U32", "I32", "F32",
                                           "BOOL", "STRING", "ARRAY", "U64", "I64", "F64"};
  auto i = static_cast<uint32_t>(t);
  return i < std::size(kNames) ? kNames[i] : "UNKNOWN";
}

bool is_integer(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16:
    case GgufType::U32: case GgufType::I32: case GgufType::U64: case GgufType::I64:
      return true;
    default:
      return false;
  }
}

bool is_number(GgufType t) { return is_integer(t) || t == GgufType::F32 || t == GgufType::F64; }

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw GgufError(path + ": " + msg);
}

std::string quoted(const std::string& key) { return "'" + key + "'"; }

std::string describe(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return type_name(v.type);
  return std::string("ARRAY of ") + type_name(std::get<GgufArray>(v.v).elem_type());
}

[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const char* expected,
                             const GgufValue& v) {
  fail(path, "metadata key " + quoted(key) + " has type " + describe(v) + ", expected " + expected);
}

[[noreturn]] void out_of_range(const std::string& path, const std::string& key, const std::string& value,
                               const char* target) {
  fail(path, "metadata key " + quoted(key) + " value " + value + " does not fit " + target);
}

uint64_t to_uint(const GgufValue& v, const std::string& path, const std::string& key) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u;
  const auto* i = std::get_if<int64_t>(&v.v);
  if (!i) wrong_type(path, key, "an integer", v);
  if (*i < 0) out_of_range(path, key, std::to_string(*i), "an unsigned integer");
  return static_cast<uint64_t>(*i);
}

int64_t to_int(const GgufValue& v, const std::string& path, const std::string& key) {
  if (const auto* i = std::get_if<int64_t>(&v.v)) return *i;
  const auto* u = std::get_if<uint64_t>(&v.v);
  if (!u) wrong_type(path, key, "an integer", v);
  if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    out_of_range(path, key, std::to_string(*u), "a signed 64-bit integer");
  }
  return static_cast<int64_t>(*u);
}

double to_float(const GgufValue& v, const std::string& path, const std::string& key) {
  if (const auto* d = std::get_if<double>(&v.v)) return *d;
  if (const auto* i = std::get_if<int64_t>(&v.v)) return static_cast<double>(*i);
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return static_cast<double>(*u);
  wrong_type(path, key, "a number", v);
}

// The array under key, if its elements pass accept; otherwise a type error saying `expected`.
template <class Accept>
GgufArray array_of(const GgufValue& v, const std::string& path, const std::string& key, const char* expected,
                   Accept accept) {
  if (v.type != GgufType::ARRAY) wrong_type(path, key, expected, v);
  const GgufArray& a = std::get<GgufArray>(v.v);
  if (!accept(a.elem_type())) wrong_type(path, key, expected, v);
  return a;
}

const GgufValue& lookup(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (!v) fail(f.path(), "missing metadata key " + quoted(key));
  return *v;
}

}  // namespace

bool GgufFile::has(const std::string& key) const { return find(key) != nullptr; }

uint64_t GgufFile::get_uint(const std::string& key) const { return to_uint(lookup(*this, key), path_, key); }

uint64_t GgufFile::get_uint(const std::string& key, uint64_t fallback) const {
  return has(key) ? get_uint(key) : fallback;
}

int64_t GgufFile::get_int(const std::string& key) const { return to_int(lookup(*this, key), path_, key); }

double GgufFile::get_float(const std::string& key) const { return to_float(lookup(*this, key), path_, key); }

double GgufFile::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const GgufValue& v = lookup(*this, key);
  if (v.type != GgufType::BOOL) wrong_type(path_, key, "BOOL", v);
  return std::get<bool>(v.v);
}

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = lookup(*this, key);
  if (v.type != GgufType::STRING) wrong_type(path_, key, "STRING", v);
  return std::string(std::get<std::string_view>(v.v));
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

// The array getters copy out of the file: a caller asking for 49152 tokens gets 49152 strings.
std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  GgufArray a = array_of(lookup(*this, key), path_, key, "an array of STRING",
                         [](GgufType t) { return t == GgufType::STRING; });
  std::vector<std::string> out;
  out.reserve(a.size());
  for (GgufValue item : a) out.emplace_back(std::get<std::string_view>(item.v));
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  GgufArray a = array_of(lookup(*this, key), path_, key, "an array of numbers", is_number);
  std::vector<float> out;
  out.reserve(a.size());
  for (GgufValue item : a) out.push_back(static_cast<float>(to_float(item, path_, key)));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  GgufArray a = array_of(lookup(*this, key), path_, key, "an array of integers", is_integer);
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (GgufValue item : a) out.push_back(to_int(item, path_, key));
  return out;
}

}  // namespace flashserve
