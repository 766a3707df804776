// GGUF reader. Every count, length and offset is checked against the bytes actually there before it
// is trusted, so a truncated or hostile file ends in a GgufError rather than a crash or a huge
// allocation. Metadata strings and arrays stay in the file's bytes: the parser only validates them,
// and they are decoded when read.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>

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
constexpr uint64_t kArrayHeaderBytes = 4 + 8;                // element type, count
// A hostile name can be megabytes long; messages quote only its start.
constexpr size_t kMaxQuotedName = 200;

// Bytes of one value of a fixed-size type; 0 for strings and arrays, whose size is in their bytes.
uint64_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: case GgufType::ARRAY: return 0;
  }
  return 0;
}

uint64_t min_value_bytes(GgufType t) {
  if (t == GgufType::STRING) return 8;  // its length
  if (t == GgufType::ARRAY) return kArrayHeaderBytes;
  return fixed_size(t);
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

std::string quoted(std::string_view s) {
  if (s.size() <= kMaxQuotedName) return "'" + std::string(s) + "'";
  return "'" + std::string(s.substr(0, kMaxQuotedName)) + "...' (" + std::to_string(s.size()) + " bytes)";
}

// ---- Decoding bytes the parser has validated ----

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

GgufValue decode(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::U8: return {t, uint64_t{load<uint8_t>(p)}};
    case GgufType::I8: return {t, int64_t{load<int8_t>(p)}};
    case GgufType::U16: return {t, uint64_t{load<uint16_t>(p)}};
    case GgufType::I16: return {t, int64_t{load<int16_t>(p)}};
    case GgufType::U32: return {t, uint64_t{load<uint32_t>(p)}};
    case GgufType::I32: return {t, int64_t{load<int32_t>(p)}};
    case GgufType::U64: return {t, load<uint64_t>(p)};
    case GgufType::I64: return {t, load<int64_t>(p)};
    case GgufType::F32: return {t, double{load<float>(p)}};
    case GgufType::F64: return {t, load<double>(p)};
    case GgufType::BOOL: return {t, load<uint8_t>(p) == 1};
    case GgufType::STRING: return {t, std::string_view(reinterpret_cast<const char*>(p + 8), load<uint64_t>(p))};
    case GgufType::ARRAY:
      return {t, GgufArray(static_cast<GgufType>(load<uint32_t>(p)), load<uint64_t>(p + 4), p + kArrayHeaderBytes)};
  }
  throw std::logic_error("GGUF: decoding a value type the parser did not validate");
}

// Just past the value at p.
const uint8_t* skip(GgufType t, const uint8_t* p) {
  if (t == GgufType::STRING) return p + 8 + load<uint64_t>(p);
  if (t != GgufType::ARRAY) return p + fixed_size(t);
  auto elem_type = static_cast<GgufType>(load<uint32_t>(p));
  uint64_t n = load<uint64_t>(p + 4);
  p += kArrayHeaderBytes;
  if (uint64_t size = fixed_size(elem_type)) return p + n * size;
  for (uint64_t i = 0; i < n; ++i) p = skip(elem_type, p);
  return p;
}

}  // namespace

GgufArray::Iterator GgufArray::begin() const { return Iterator(elem_type_, 0, first_); }
GgufArray::Iterator GgufArray::end() const { return Iterator(elem_type_, size_, nullptr); }
GgufValue GgufArray::Iterator::operator*() const { return decode(elem_type_, at_); }

GgufArray::Iterator& GgufArray::Iterator::operator++() {
  at_ = skip(elem_type_, at_);
  ++index_;
  return *this;
}

// Walks the bytes once, filling the GgufFile.
class GgufParser {
 public:
  GgufParser(GgufFile& file, const uint8_t* data, size_t size) : f_(file), data_(data), size_(size) {}

  void parse() {
    parse_magic_and_version();
    context_ = "header";
    uint64_t n_tensors = read<uint64_t>();
    uint64_t n_kv = read<uint64_t>();
    check_count(n_kv, kMinKvBytes, "metadata key/value count");
    f_.metadata_.reserve(n_kv);
    for (uint64_t i = 0; i < n_kv; ++i) parse_kv(i);
    sort_keys();
    // Each tensor info follows the metadata, so the byte budget is only known now.
    check_count(n_tensors, kMinTensorInfoBytes, "tensor count");
    std::vector<uint64_t> offsets;
    offsets.reserve(n_tensors);
    f_.tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) offsets.push_back(parse_tensor_info(i));
    check_tensor_names();
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
    T v = load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return v;
  }

  std::string_view read_string() {
    uint64_t n = read<uint64_t>();
    check_count(n, 1, "string length");
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), n);
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
    std::string_view key = read_string();
    context_ += " (" + quoted(key) + ")";
    GgufType type = read_type();
    const uint8_t* value = data_ + pos_;
    validate_value(type, 0);
    f_.metadata_.push_back({key, decode(type, value)});
  }

  // Sorted keys give lookups by binary search and put duplicates side by side.
  void sort_keys() {
    auto& m = f_.metadata_;
    std::sort(m.begin(), m.end(), [](const GgufKeyValue& a, const GgufKeyValue& b) { return a.key < b.key; });
    auto same_key = [](const GgufKeyValue& a, const GgufKeyValue& b) { return a.key == b.key; };
    if (auto dup = std::adjacent_find(m.begin(), m.end(), same_key); dup != m.end()) {
      fail_here("duplicate metadata key " + quoted(dup->key));
    }
  }

  // Moves past one value, checking everything decode() and skip() will rely on.
  void validate_value(GgufType type, int depth) {
    switch (type) {
      case GgufType::STRING: read_string(); return;
      case GgufType::ARRAY: validate_array(depth + 1); return;
      case GgufType::BOOL: {
        uint8_t b = read<uint8_t>();
        if (b > 1) fail_here("invalid bool value " + std::to_string(b) + " in " + context_);
        return;
      }
      default: need(fixed_size(type)); pos_ += fixed_size(type); return;
    }
  }

  // Time is linear in the array's bytes and nothing is allocated, however many elements it has.
  void validate_array(int depth) {
    if (depth > kMaxArrayDepth) fail_here("arrays nested too deeply in " + context_);
    GgufType elem_type = read_type();
    uint64_t n = read<uint64_t>();
    check_count(n, min_value_bytes(elem_type), "array length");
    if (elem_type != GgufType::BOOL && fixed_size(elem_type) != 0) {
      pos_ += n * fixed_size(elem_type);  // check_count proved these bytes are there
      return;
    }
    for (uint64_t i = 0; i < n; ++i) validate_value(elem_type, depth);
  }

  // Returns the tensor's offset relative to the data section, which is placed after all infos.
  uint64_t parse_tensor_info(uint64_t index) {
    context_ = "tensor info " + std::to_string(index);
    GgufTensor t;
    t.name = read_string();
    context_ += " (" + quoted(t.name) + ")";
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

  // Sorting views of the names costs 16 bytes a tensor, where a set of copies would cost ~100.
  void check_tensor_names() const {
    std::vector<std::string_view> names;
    names.reserve(f_.tensors_.size());
    for (const GgufTensor& t : f_.tensors_) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    if (auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end()) {
      fail_here("duplicate tensor name " + quoted(*dup));
    }
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

std::unique_ptr<GgufFile> GgufFile::open_bytes(const void* data, size_t size, const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  if (size == 0) fail(name, "empty file");
  GgufParser(*f, static_cast<const uint8_t*>(data), size).parse();
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

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = std::lower_bound(metadata_.begin(), metadata_.end(), key,
                             [](const GgufKeyValue& kv, std::string_view k) { return kv.key < k; });
  return it != metadata_.end() && it->key == key ? &it->value : nullptr;
}

}  // namespace flashserve
