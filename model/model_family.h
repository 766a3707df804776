// The seam between the shared layer sequence (llama_forward.cpp) and the architectures that run
// on it: a ModelFamily says what sets one apart -- its RoPE layout, the GGUF keys it reads beyond
// the common ones (and the ModelConfig switches they turn on), and the per-layer tensors it
// brings. One file per family in model/families/ defines one; model_family.cpp lists them.
// Adding a family is that file, its line in the list, and its test against the f64 reference.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace flashserve {

class GgufFile;
struct ModelConfig;

// Reads `<arch>.<name>` with the file's path and the full key in every error (GgufError).
class ConfigKeys {
 public:
  ConfigKeys(const GgufFile& f, const std::string& arch) : f_(f), prefix_(arch + ".") {}

  std::string key(const std::string& name) const { return prefix_ + name; }
  bool has(const std::string& name) const;
  uint64_t uint_or(const std::string& name, uint64_t fallback) const;
  int32_t positive_int(const std::string& name) const;
  int32_t positive_int(const std::string& name, int32_t fallback) const;
  float positive_float(const std::string& name) const;
  float positive_float(const std::string& name, float fallback) const;
  float finite_float(const std::string& name, float fallback) const;  // any finite number
  std::string string(const std::string& name, const std::string& fallback) const;
  [[noreturn]] void fail(const std::string& name, const std::string& msg) const;

 private:
  const GgufFile& f_;
  std::string prefix_;
};

// Whether a family's layers carry a group of tensors. A file that holds a group its family does
// not use is refused (as llama.cpp refuses tensors it would not load), never silently ignored.
enum class Presence { kAbsent, kOptional, kRequired };

struct LayerTensors {
  Presence qkv_bias = Presence::kAbsent;    // attn_{q,k,v}.bias
  Presence qk_norm = Presence::kAbsent;     // attn_{q,k}_norm.weight: each head's Q and K normed
  Presence post_norms = Presence::kAbsent;  // post_attention_norm, post_ffw_norm: each branch's output normed
};

struct ModelFamily {
  std::string_view arch;  // general.architecture
  bool rope_neox;         // rotate halves of each head rather than adjacent pairs
  LayerTensors tensors;
  // The family's own keys, read after the common ones into c; nullptr where it has none.
  void (*read_keys)(const ConfigKeys& k, ModelConfig& c);
};

// nullptr for an architecture no family covers.
const ModelFamily* find_family(std::string_view arch);
// "llama, qwen2, ...": for messages.
std::string family_names();

}  // namespace flashserve
