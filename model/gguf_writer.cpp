// GGUF v3 writer. Tests build tiny models with it, so it refuses anything the reader would reject
// (bad shapes, wrong data sizes, duplicate names) at the call that introduces it.
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>

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

// Encodes the kinds the add_* calls create; arrays hold scalars of one of those kinds.
void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufType::U32: put<uint32_t>(out, static_cast<uint32_t>(std::get<uint64_t>(v.v))); break;
    case GgufType::I32: put<int32_t>(out, static_cast<int32_t>(std::get<int64_t>(v.v))); break;
    case GgufType::F32: put<float>(out, static_cast<float>(std::get<double>(v.v))); break;
    case GgufType::BOOL: put<uint8_t>(out, std::get<bool>(v.v) ? 1 : 0); break;
    case GgufType::STRING: put_string(out, std::get<std::string>(v.v)); break;
    case GgufType::ARRAY: {
      const GgufArray& a = *std::get<std::shared_ptr<GgufArray>>(v.v);
      put<uint32_t>(out, static_cast<uint32_t>(a.elem_type));
      put<uint64_t>(out, a.items.size());
      for (const GgufValue& item : a.items) put_value(out, item);
      break;
    }
    default: throw std::logic_error("GgufWriter: no encoder for this value type");
  }
}

void put_kv(std::vector<uint8_t>& out, const std::string& key, const GgufValue& v) {
  put_string(out, key);
  put<uint32_t>(out, static_cast<uint32_t>(v.type));
  put_value(out, v);
}

template <class T, class Make>
GgufValue make_array(GgufType elem_type, const std::vector<T>& values, Make make) {
  auto a = std::make_shared<GgufArray>();
  a->elem_type = elem_type;
  for (const T& x : values) a->items.push_back(make(x));
  return {GgufType::ARRAY, std::move(a)};
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

using KvList = std::vector<std::pair<std::string, GgufValue>>;

void add_kv(KvList& kv, const std::string& key, GgufValue value) {
  // The alignment key is derived from set_alignment so the two can never disagree.
  if (key == kAlignmentKey) throw GgufError("GgufWriter: use set_alignment() for general.alignment");
  for (const auto& entry : kv) {
    if (entry.first == key) throw GgufError("GgufWriter: duplicate metadata key '" + key + "'");
  }
  kv.emplace_back(key, std::move(value));
}

}  // namespace

void GgufWriter::set_alignment(uint32_t alignment) {
  if (!std::has_single_bit(alignment)) {
    throw GgufError("GgufWriter: alignment " + std::to_string(alignment) + " is not a power of two");
  }
  alignment_ = alignment;
}

void GgufWriter::add_uint32(const std::string& key, uint32_t v) { add_kv(kv_, key, {GgufType::U32, uint64_t{v}}); }
void GgufWriter::add_int32(const std::string& key, int32_t v) { add_kv(kv_, key, {GgufType::I32, int64_t{v}}); }
void GgufWriter::add_float32(const std::string& key, float v) { add_kv(kv_, key, {GgufType::F32, double{v}}); }
void GgufWriter::add_bool(const std::string& key, bool v) { add_kv(kv_, key, {GgufType::BOOL, v}); }
void GgufWriter::add_string(const std::string& key, const std::string& v) { add_kv(kv_, key, {GgufType::STRING, v}); }

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& v) {
  auto make = [](const std::string& s) { return GgufValue{GgufType::STRING, s}; };
  add_kv(kv_, key, make_array(GgufType::STRING, v, make));
}

void GgufWriter::add_float32_array(const std::string& key, const std::vector<float>& v) {
  add_kv(kv_, key, make_array(GgufType::F32, v, [](float x) { return GgufValue{GgufType::F32, double{x}}; }));
}

void GgufWriter::add_int32_array(const std::string& key, const std::vector<int32_t>& v) {
  add_kv(kv_, key, make_array(GgufType::I32, v, [](int32_t x) { return GgufValue{GgufType::I32, int64_t{x}}; }));
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
  if (write_alignment) put_kv(out, kAlignmentKey, {GgufType::U32, uint64_t{alignment_}});
  for (const auto& [key, value] : kv_) put_kv(out, key, value);

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
