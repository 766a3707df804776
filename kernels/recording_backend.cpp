#include "kernels/recording_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace flashserve::kernels {

std::string describe(const OpUse& use) {
  std::string facts;
  auto fact = [&](const char* name, int64_t v) {
    if (v == 0) return;
    facts += (facts.empty() ? "" : ", ") + std::string(name) + " " + std::to_string(v);
  };
  fact("head_dim", use.shape.head_dim);
  fact("group", use.shape.group);
  fact("window", use.shape.window);
  fact("experts", use.shape.experts);
  fact("top_k", use.shape.top_k);
  std::string s = std::string(op_name(use.op)) + " on " + std::string(dtype_name(use.type));
  return facts.empty() ? s : s + " (" + facts + ")";
}

void RecordingBackend::memory_info(size_t& free_bytes, size_t& total_bytes) const {
  free_bytes = total_bytes = std::numeric_limits<size_t>::max() / 2;
}

// Distinct, 64-byte aligned and never dereferenced: the ops here only note their arguments' types.
void* RecordingBackend::allocate(size_t bytes) {
  const uintptr_t at = next_address_;
  next_address_ += (bytes + 127) / 64 * 64;
  return reinterpret_cast<void*>(at);
}

void RecordingBackend::copy_out(void* host_dst, const void*, size_t bytes) {
  auto* out = static_cast<unsigned char*>(host_dst);
  for (size_t i = 0; i + sizeof(int32_t) <= bytes; i += sizeof(int32_t)) {
    const auto word = int32_t(i / sizeof(int32_t));
    std::memcpy(out + i, &word, sizeof word);
  }
  std::memset(out + bytes / sizeof(int32_t) * sizeof(int32_t), 0, bytes % sizeof(int32_t));
}

std::unique_ptr<RecordedStep> RecordingBackend::record(const std::function<void()>&) {
  throw std::logic_error("the recording backend records ops, not steps");
}

void RecordingBackend::note(const OpUse& use) {
  if (std::find(uses_.begin(), uses_.end(), use) == uses_.end()) uses_.push_back(use);
}

}  // namespace flashserve::kernels
