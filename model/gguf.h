// GGUF v2/v3 files: a memory-mapped reader that validates everything against the file size, and a
// writer (tests use it to build tiny models). Spec: github.com/ggml-org/ggml/blob/master/docs/gguf.md
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
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

struct GgufArray;
// Integers widen to int64/uint64, floats to double; `type` keeps the stored type.
struct GgufValue {
  GgufType type;
  std::variant<int64_t, uint64_t, double, bool, std::string, std::shared_ptr<GgufArray>> v;
};
struct GgufArray {
  GgufType elem_type;
  std::vector<GgufValue> items;
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
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
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
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, GgufValue> metadata_;
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
  uint32_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace flashserve
