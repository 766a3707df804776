// GGUF v2/v3 files: a reader that validates everything against the file size, and a writer (tests
// use it to build tiny models). Spec: github.com/ggml-org/ggml/blob/master/docs/gguf.md
//
// The reader copies nothing out of the file's metadata: strings and arrays are views of its bytes
// (a read-only mapping, or a caller's buffer), decoded when read. Its heap use is a few dozen bytes
// per key and per tensor, never per array element, so no file makes it hold more than a small
// multiple of the file's own size (under 4x measured on the densest files; test_gguf checks 5x).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>
#include "kernels/dtype.h"

namespace flashserve {

// Thrown for an unreadable, truncated, corrupt or unsupported file; what() names the problem.
class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// GGUF metadata value types, with GGUF's ids.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};

struct GgufValue;

// A metadata array as it lies in the file: size() elements of elem_type(), decoded one at a time
// by iterating. Arrays of fixed-size elements could be indexed, but strings and nested arrays have
// to be walked, so iteration is the one way in for all of them.
class GgufArray {
 public:
  class Iterator;
  // `first` points at the first element's bytes, which the reader has validated.
  GgufArray(GgufType elem_type, uint64_t size, const uint8_t* first)
      : first_(first), size_(size), elem_type_(elem_type) {}
  GgufType elem_type() const { return elem_type_; }
  uint64_t size() const { return size_; }
  Iterator begin() const;
  Iterator end() const;

 private:
  const uint8_t* first_;
  uint64_t size_;
  GgufType elem_type_;
};

// Integers widen to int64/uint64, floats to double; `type` keeps the stored type. Strings and
// arrays view the file's bytes: a GgufValue is valid as long as the GgufFile it came from.
struct GgufValue {
  GgufType type;
  std::variant<int64_t, uint64_t, double, bool, std::string_view, GgufArray> v;
};

// Enough of an input iterator for range-for: each step decodes the next element.
class GgufArray::Iterator {
 public:
  Iterator(GgufType elem_type, uint64_t index, const uint8_t* at) : at_(at), index_(index), elem_type_(elem_type) {}
  GgufValue operator*() const;
  Iterator& operator++();
  bool operator==(const Iterator& other) const { return index_ == other.index_; }

 private:
  const uint8_t* at_;  // the current element's bytes
  uint64_t index_;
  GgufType elem_type_;
};

struct GgufKeyValue {
  std::string_view key;  // into the file's bytes
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> shape;   // GGML order: shape[0] is the row length (contiguous dimension)
  kernels::DType type;
  const void* data;             // into the mapping
  size_t num_bytes;
  int64_t num_elements() const;
};

class GgufFile {
 public:
  // Throws GgufError naming the problem (missing file, bad magic, unsupported version or tensor
  // type, truncated header, tensor data out of bounds or misaligned, duplicate names...).
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // The same over bytes already in memory, which must outlive the GgufFile (nothing is copied);
  // `name` stands for the path in messages. Tensor data is only as aligned as `data` is.
  static std::unique_ptr<GgufFile> open_bytes(const void* data, size_t size, const std::string& name);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }  // sorted by key
  const GgufValue* find(std::string_view key) const;  // nullptr if absent
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find_tensor(const std::string& name) const;  // nullptr if absent

  // Typed metadata access. The plain getters throw GgufError if the key is missing or has an
  // incompatible type (any integer type reads as an integer if it fits; any number as float).
  bool has(const std::string& key) const;
  uint64_t get_uint(const std::string& key) const;
  uint64_t get_uint(const std::string& key, uint64_t fallback) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;

 private:
  GgufFile() = default;
  std::string path_;
  uint32_t version_ = 0;
  void* map_ = nullptr;  // the mapping open() made, unmapped on destruction; null for open_bytes()
  size_t map_size_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::vector<GgufTensor> tensors_;
  friend class GgufParser;
};

// Builds a GGUF v3 file in memory and writes it out.
class GgufWriter {
 public:
  void set_alignment(uint32_t alignment);  // default 32; also written as general.alignment if != 32
  void add_uint32(const std::string& key, uint32_t v);
  void add_int32(const std::string& key, int32_t v);
  void add_float32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_string(const std::string& key, const std::string& v);
  void add_string_array(const std::string& key, const std::vector<std::string>& v);
  void add_float32_array(const std::string& key, const std::vector<float>& v);
  void add_int32_array(const std::string& key, const std::vector<int32_t>& v);
  // data: row_bytes(type, shape[0]) * (product of the other dims) bytes, copied.
  void add_tensor(const std::string& name, const std::vector<int64_t>& shape, kernels::DType type,
                  const void* data, size_t num_bytes);
  std::vector<uint8_t> serialize() const;
  void write(const std::string& path) const;  // throws GgufError on I/O failure

 private:
  struct Tensor { std::string name; std::vector<int64_t> shape; kernels::DType type; std::vector<uint8_t> data; };
  struct Kv { std::string key; std::vector<uint8_t> encoded; };  // encoded: the type id, then the value
  void add_kv(const std::string& key, std::vector<uint8_t> encoded);
  uint32_t alignment_ = 32;
  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace flashserve
