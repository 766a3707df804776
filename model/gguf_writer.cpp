// GGUF v3 writer. Tests build tiny models with it, so it refuses anything the reader would reject
// (bad shapes, wrong data sizes, duplicate names) at the call that introduces it.
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <type_traits>

#include "model/gguf.h"

namespace flashserve {
namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr const char* kAlignmentKey = "general.alignment";

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
  out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

// A value as the file holds it: its type id, then its bytes.
std::vector<uint8_t> with_type(GgufType type) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, static_cast<uint32_t>(type));
  return out;
}

template <class T>
std::vector<uint8_t> scalar(GgufType type, T v) {
  std::vector<uint8_t> out = with_type(type);
  put<T>(out, v);
  return out;
}

template <class T>
std::vector<uint8_t> array(GgufType elem_type, const std::vector<T>& values) {
  std::vector<uint8_t> out = with_type(GgufType::ARRAY);
  put<uint32_t>(out, static_cast<uint32_t>(elem_type));
  put<uint64_t>(out, values.size());
  for (const T& x : values) {
    if constexpr (std::is_same_v<T, std::string>) {
      put_string(out, x);
    } else {
      put<T>(out, x);
    }
  }
  return out;
}

void put_kv(std::vector<uint8_t>& out, const std::string& key, const std::vector<uint8_t>& encoded) {
  put_string(out, key);
  out.insert(out.end(), encoded.begin(), encoded.end());
}

[[noreturn]] void tensor_error(const std::string& name, const std::string& msg) {
  throw GgufError("GgufWriter: tensor '" + name + "' " + msg);
}

size_t expected_bytes(const std::string& name, const std::vector<int64_t>& shape, kernels::DType type) {
  if (shape.empty() || shape.size() > 4) tensor_error(name, "must have 1 to 4 dimensions");
  int64_t rows = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] <= 0) tensor_error(name, "has a non-positive dimension");
    if (d > 0) rows *= shape[d];
  }
  if (shape[0] % kernels::block_elems(type) != 0) {
    tensor_error(name, "row length " + std::to_string(shape[0]) + " is not a multiple of the block size");
  }
  return kernels::row_bytes(type, shape[0]) * static_cast<size_t>(rows);
}

}  // namespace

void GgufWriter::add_kv(const std::string& key, std::vector<uint8_t> encoded) {
  // The alignment key is derived from set_alignment so the two can never disagree.
  if (key == kAlignmentKey) throw GgufError("GgufWriter: use set_alignment() for general.alignment");
  for (const Kv& kv : kv_) {
    if (kv.key == key) throw GgufError("GgufWriter: duplicate metadata key '" + key + "'");
  }
  kv_.push_back({key, std::move(encoded)});
}

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    throw GgufError("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  alignment_ = alignment;
}

void GgufWriter::add_uint32(const std::string& key, uint32_t v) { add_kv(key, scalar(GgufType::U32, v)); }
void GgufWriter::add_int32(const std::string& key, int32_t v) { add_kv(key, scalar(GgufType::I32, v)); }
void GgufWriter::add_float32(const std::string& key, float v) { add_kv(key, scalar(GgufType::F32, v)); }
void GgufWriter::add_bool(const std::string& key, bool v) { add_kv(key, scalar<uint8_t>(GgufType::BOOL, v ? 1 : 0)); }

void GgufWriter::add_string(const std::string& key, const std::string& v) {
  std::vector<uint8_t> encoded = with_type(GgufType::STRING);
  put_string(encoded, v);
  add_kv(key, std::move(encoded));
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  add_kv(key, array(GgufType::STRING, v));
}

void GgufWriter::add_float32_array(const std::string& key, const std::vector<float>& v) {
  add_kv(key, array(GgufType::F32, v));
}

void GgufWriter::add_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  add_kv(key, array(GgufType::I32, v));
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& shape, kernels::DType type,
                            const void* data, size_t num_bytes) {
  for (const Tensor& t : tensors_) {
    if (t.name == name) tensor_error(name, "added twice");
  }
  size_t expected = expected_bytes(name, shape, type);
  if (num_bytes != expected) {
    tensor_error(name, "has " + std::to_string(num_bytes) + " bytes of data, expected " + std::to_string(expected));
  }
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back({name, shape, type, std::vector<uint8_t>(p, p + num_bytes)});
}

std::vector<uint8_t> GgufWriter::serialize() const {
  std::vector<uint8_t> out = {'G', 'G', 'U', 'F'};
  bool write_alignment = alignment_ != kDefaultAlignment;
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, kv_.size() + (write_alignment ? 1 : 0));
  if (write_alignment) put_kv(out, kAlignmentKey, scalar(GgufType::U32, alignment_));
  for (const Kv& kv : kv_) put_kv(out, kv.key, kv.encoded);

  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) put<uint64_t>(out, static_cast<uint64_t>(d));
    put<uint32_t>(out, static_cast<uint32_t>(t.type));
    put<uint64_t>(out, offset);
    offset = (offset + t.data.size() + alignment_ - 1) / alignment_ * alignment_;
  }
  // Padding goes before each tensor, not after the last: the file then ends exactly at the data,
  // so any truncation is detectable.
  for (const Tensor& t : tensors_) {
    pad_to(out, alignment_);
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw GgufError(path + ": cannot open for writing: " + std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw GgufError(path + ": write failed");
}

}  // namespace flashserve
