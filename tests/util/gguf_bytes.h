// Raw GGUF bytes, for files the writer refuses to produce (every value type, nested arrays,
// corrupt headers). Little-endian, as the reader expects.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "model/gguf.h"

namespace flashserve::test {

struct GgufBytes {
  std::vector<uint8_t> b;
  template <class T>
  GgufBytes& put(T v) {
    size_t at = b.size();
    b.resize(at + sizeof(T));
    std::memcpy(b.data() + at, &v, sizeof(T));
    return *this;
  }
  GgufBytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& key(const std::string& k, GgufType t) { return str(k).put(static_cast<uint32_t>(t)); }
  // An array's element type and count; its elements follow.
  GgufBytes& array(GgufType elem, uint64_t n) { return put(static_cast<uint32_t>(elem)).put<uint64_t>(n); }
  GgufBytes& tensor(const std::string& name, const std::vector<uint64_t>& shape, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) put(d);
    return put(type).put(offset);
  }
  GgufBytes& pad(size_t alignment) {
    b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    b.resize(b.size() + n, 0);
    return *this;
  }
};

// Magic, version and the two counts.
inline GgufBytes gguf_header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  GgufBytes h;
  h.b = {'G', 'G', 'U', 'F'};
  return h.put(version).put(n_tensors).put(n_kv);
}

}  // namespace flashserve::test
