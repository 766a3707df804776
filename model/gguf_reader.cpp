// GGUF reader. The file is mapped read-only and every count, length and offset is checked against
// the bytes actually there before it is trusted, so a truncated or hostile file ends in a GgufError
// rather than a crash or a huge allocation.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "model/gguf.h"

namespace flashserve {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr uint64_t kMaxDims = 4;  // GGML_MAX_DIMS
// Real files nest at most once; the cap keeps a crafted file from exhausting the stack.
constexpr int kMaxArrayDepth = 8;
// Smallest possible encodings, used to reject counts that cannot fit in the bytes left.
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name length, n_dims, 1 dim, type, offset
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;                  // key length, type, 1-byte value

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

uint64_t min_value_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::ARRAY: return 4 + 8;  // element type + count
    default: return 8;                   // 64-bit scalars, and a string's length
  }
}

uint64_t align_up(uint64_t x, uint64_t alignment) { return (x + alignment - 1) & ~(alignment - 1); }

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

// ggml's names for the ids we reject, so the error says which quantization the file uses.
std::string ggml_type_label(uint32_t id) {
  static constexpr const char* kNames[] = {
      "F32",  "F16",     "Q4_0",    "Q4_1",   "Q4_2", "Q4_3", "Q5_0",  "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K",    "Q4_K",    "Q5_K",   "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS",
      "IQ1_S", "IQ4_NL", "IQ3_S",   "IQ2_S",  "IQ4_XS", "I8", "I16",  "I32",   "I64",  "F64",
      "IQ1_M", "BF16"};
  std::string label = std::to_string(id);
  return id < std::size(kNames) ? label + " (" + kNames[id] + ")" : label;
}

[[noreturn]] void fail(const std::string& path, const std::string& msg) {
  throw GgufError(path + ": " + msg);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

// Walks the mapped bytes once, filling the GgufFile.
class GgufParser {
 public:
  GgufParser(GgufFile& file, const uint8_t* data, size_t size) : f_(file), data_(data), size_(size) {}

  void parse() {
    parse_magic_and_version();
    context_ = "header";
    uint64_t n_tensors = read<uint64_t>();
    uint64_t n_kv = read<uint64_t>();
    check_count(n_kv, kMinKvBytes, "metadata key/value count");
    for (uint64_t i = 0; i < n_kv; ++i) parse_kv(i);
    // Each tensor info follows the metadata, so the byte budget is only known now.
    check_count(n_tensors, kMinTensorInfoBytes, "tensor count");
    std::vector<uint64_t> offsets;
    offsets.reserve(n_tensors);
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) offsets.push_back(parse_tensor_info(i));
    place_tensors(offsets);
  }

 private:
  [[noreturn]] void fail_here(const std::string& msg) const { fail(f_.path_, msg); }

  void need(uint64_t n) const {
    if (n > size_ - pos_) fail_here("truncated while reading " + context_);
  }

  // A claimed count of items that take at least min_bytes each must fit in the bytes left.
  void check_count(uint64_t count, uint64_t min_bytes, const std::string& what) const {
    if (count > (size_ - pos_) / min_bytes) {
      fail_here("truncated or corrupt: " + what + " " + std::to_string(count) + " in " + context_ +
                " exceeds the " + std::to_string(size_ - pos_) + " bytes left in the file");
    }
  }

  template <class T>
  T read() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string() {
    uint64_t n = read<uint64_t>();
    check_count(n, 1, "string length");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  void parse_magic_and_version() {
    context_ = "magic";
    need(4);
    if (std::memcmp(data_, "GGUF", 4) != 0) fail_here("bad magic (not a GGUF file)");
    pos_ = 4;
    context_ = "version";
    uint32_t version = read<uint32_t>();
    if (version == 1) fail_here("GGUF version 1 is not supported (only versions 2 and 3)");
    // A small version number byte-swapped means the file was written big-endian.
    uint32_t swapped = __builtin_bswap32(version);
    if (swapped >= 1 && swapped <= 3) fail_here("big-endian GGUF files are not supported");
    if (version != 2 && version != 3) fail_here("unsupported GGUF version " + std::to_string(version));
    f_.version_ = version;
  }

  GgufType read_type() {
    uint32_t id = read<uint32_t>();
    if (id > static_cast<uint32_t>(GgufType::F64)) fail_here("unknown value type " + std::to_string(id) + " in " + context_);
    return static_cast<GgufType>(id);
  }

  void parse_kv(uint64_t index) {
    context_ = "metadata key " + std::to_string(index);
    std::string key = read_string();
    context_ += " (" + quoted(key) + ")";
    GgufType type = read_type();
    GgufValue value = read_value(type, 0);
    if (!f_.metadata_.emplace(key, std::move(value)).second) {
      fail_here("duplicate metadata key " + quoted(key));
    }
  }

  GgufValue read_value(GgufType type, int depth) {
    switch (type) {
      case GgufType::U8: return {type, uint64_t{read<uint8_t>()}};
      case GgufType::I8: return {type, int64_t{read<int8_t>()}};
      case GgufType::U16: return {type, uint64_t{read<uint16_t>()}};
      case GgufType::I16: return {type, int64_t{read<int16_t>()}};
      case GgufType::U32: return {type, uint64_t{read<uint32_t>()}};
      case GgufType::I32: return {type, int64_t{read<int32_t>()}};
      case GgufType::U64: return {type, read<uint64_t>()};
      case GgufType::I64: return {type, read<int64_t>()};
      case GgufType::F32: return {type, double{read<float>()}};
      case GgufType::F64: return {type, read<double>()};
      case GgufType::BOOL: return {type, read_bool()};
      case GgufType::STRING: return {type, read_string()};
      case GgufType::ARRAY: return {type, read_array(depth + 1)};
    }
    fail_here("unknown value type in " + context_);  // unreachable: read_type validated it
  }

  bool read_bool() {
    uint8_t b = read<uint8_t>();
    if (b > 1) fail_here("invalid bool value " + std::to_string(b) + " in " + context_);
    return b == 1;
  }

  std::shared_ptr<GgufArray> read_array(int depth) {
    if (depth > kMaxArrayDepth) fail_here("arrays nested too deeply in " + context_);
    auto array = std::make_shared<GgufArray>();
    array->elem_type = read_type();
    uint64_t n = read<uint64_t>();
    check_count(n, min_value_bytes(array->elem_type), "array length");
    array->items.reserve(n);
    for (uint64_t i = 0; i < n; ++i) array->items.push_back(read_value(array->elem_type, depth));
    return array;
  }

  // Returns the tensor's offset relative to the data section, which is placed after all infos.
  uint64_t parse_tensor_info(uint64_t index) {
    context_ = "tensor info " + std::to_string(index);
    GgufTensor t;
    t.name = read_string();
    context_ += " (" + quoted(t.name) + ")";
    if (!tensor_names_.insert(t.name).second) fail_here("duplicate tensor name " + quoted(t.name));
    t.shape = read_shape(t.name);
    uint32_t type_id = read<uint32_t>();
    auto dtype = kernels::dtype_from_ggml(type_id);
    if (!dtype) fail_here("tensor " + quoted(t.name) + " has unsupported type " + ggml_type_label(type_id));
    t.type = *dtype;
    t.num_bytes = tensor_bytes(t);
    uint64_t offset = read<uint64_t>();
    f_.tensors_.push_back(std::move(t));
    return offset;
  }

  std::vector<int64_t> read_shape(const std::string& name) {
    uint32_t n_dims = read<uint32_t>();
    if (n_dims < 1 || n_dims > kMaxDims) {
      fail_here("tensor " + quoted(name) + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    }
    std::vector<int64_t> shape;
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = read<uint64_t>();
      constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
      if (dim == 0 || dim > kMax / elements) {
        fail_here("tensor " + quoted(name) + " has invalid dimension " + std::to_string(d) + " = " +
                  std::to_string(dim) + " (zero, or the element count overflows)");
      }
      elements *= dim;
      shape.push_back(static_cast<int64_t>(dim));
    }
    return shape;
  }

  size_t tensor_bytes(const GgufTensor& t) const {
    int64_t block = kernels::block_elems(t.type);
    if (t.shape[0] % block != 0) {
      fail_here("tensor " + quoted(t.name) + " row length " + std::to_string(t.shape[0]) +
                " is not a multiple of the " + std::string(kernels::dtype_name(t.type)) + " block size " +
                std::to_string(block));
    }
    // The element count fits int64, but block overhead (34 bytes per 32 Q8_0 values) can push the
    // byte count past it; no file that large can exist anyway.
    uint64_t rows = static_cast<uint64_t>(t.num_elements() / t.shape[0]);
    uint64_t blocks = static_cast<uint64_t>(t.shape[0] / block);
    uint64_t max_bytes = std::numeric_limits<int64_t>::max();
    if (blocks > max_bytes / rows / static_cast<uint64_t>(kernels::block_bytes(t.type))) {
      fail_here("tensor " + quoted(t.name) + " is too large");
    }
    return kernels::row_bytes(t.type, t.shape[0]) * rows;
  }

  uint64_t alignment() const {
    if (!f_.has("general.alignment")) return kDefaultAlignment;
    uint64_t a = f_.get_uint("general.alignment");
    if (a == 0 || a > std::numeric_limits<uint32_t>::max() || !std::has_single_bit(a)) {
      fail_here("general.alignment " + std::to_string(a) + " is not a power of two that fits 32 bits");
    }
    return a;
  }

  void place_tensors(const std::vector<uint64_t>& offsets) {
    uint64_t align = alignment();
    uint64_t data_start = align_up(pos_, align);
    for (size_t i = 0; i < offsets.size(); ++i) {
      GgufTensor& t = f_.tensors_[i];
      if (offsets[i] % align != 0) {
        fail_here("tensor " + quoted(t.name) + " offset " + std::to_string(offsets[i]) +
                  " is not a multiple of the alignment " + std::to_string(align));
      }
      uint64_t begin = saturating_add(data_start, offsets[i]);
      uint64_t end = saturating_add(begin, t.num_bytes);
      if (end > size_) {
        fail_here("tensor " + quoted(t.name) + " data [" + std::to_string(begin) + ", " + std::to_string(end) +
                  ") beyond file size " + std::to_string(size_));
      }
      t.data = data_ + begin;
    }
  }

  GgufFile& f_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string context_;  // what is being read, for error messages
  std::set<std::string> tensor_names_;
};

int64_t GgufTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Closes the descriptor however open() leaves; the mapping outlives it.
struct Fd {
  int fd;
  ~Fd() { if (fd >= 0) ::close(fd); }
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) fail(path, "cannot open: " + errno_text());
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0) fail(path, "cannot stat: " + errno_text());
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  if (st.st_size == 0) fail(path, "empty file");
  void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd.fd, 0);
  if (map == MAP_FAILED) fail(path, "cannot map: " + errno_text());
  f->map_ = map;  // from here the destructor unmaps, also when parsing throws
  f->map_size_ = static_cast<size_t>(st.st_size);
  GgufParser(*f, static_cast<const uint8_t*>(map), f->map_size_).parse();
  return f;
}

GgufFile::~GgufFile() {
  if (map_) ::munmap(map_, map_size_);
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// ---- Typed metadata access ----
namespace {

std::string describe(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return type_name(v.type);
  return std::string("ARRAY of ") + type_name(std::get<std::shared_ptr<GgufArray>>(v.v)->elem_type);
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
const GgufArray& array_of(const GgufValue& v, const std::string& path, const std::string& key,
                          const char* expected, Accept accept) {
  if (v.type != GgufType::ARRAY) wrong_type(path, key, expected, v);
  const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(v.v);
  if (!accept(a.elem_type)) wrong_type(path, key, expected, v);
  return a;
}

const GgufValue& lookup(const GgufFile& f, const std::string& key) {
  auto it = f.metadata().find(key);
  if (it == f.metadata().end()) fail(f.path(), "missing metadata key " + quoted(key));
  return it->second;
}

}  // namespace

bool GgufFile::has(const std::string& key) const { return metadata_.count(key) != 0; }

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
  return std::get<std::string>(v.v);
}

std::string GgufFile::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufArray& a = array_of(lookup(*this, key), path_, key, "an array of STRING",
                                [](GgufType t) { return t == GgufType::STRING; });
  std::vector<std::string> out;
  out.reserve(a.items.size());
  for (const GgufValue& item : a.items) out.push_back(std::get<std::string>(item.v));
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufArray& a = array_of(lookup(*this, key), path_, key, "an array of numbers", is_number);
  std::vector<float> out;
  out.reserve(a.items.size());
  for (const GgufValue& item : a.items) out.push_back(static_cast<float>(to_float(item, path_, key)));
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufArray& a = array_of(lookup(*this, key), path_, key, "an array of integers", is_integer);
  std::vector<int64_t> out;
  out.reserve(a.items.size());
  for (const GgufValue& item : a.items) out.push_back(to_int(item, path_, key));
  return out;
}

}  // namespace flashserve
