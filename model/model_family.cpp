#include "model/model_family.h"

#include <cmath>
#include <limits>

#include "model/gguf.h"

namespace flashserve {

// Each defined in its file under model/families/.
extern const ModelFamily kLlamaFamily, kQwen2Family, kQwen3Family, kGemma3Family, kGraniteFamily;

namespace {

const ModelFamily* const kFamilies[] = {&kLlamaFamily, &kQwen2Family, &kQwen3Family, &kGemma3Family, &kGraniteFamily};

}  // namespace

const ModelFamily* find_family(std::string_view arch) {
  for (const ModelFamily* f : kFamilies) {
    if (f->arch == arch) return f;
  }
  return nullptr;
}

std::string family_names() {
  std::string out;
  for (const ModelFamily* f : kFamilies) {
    if (!out.empty()) out += ", ";
    out += f->arch;
  }
  return out;
}

bool ConfigKeys::has(const std::string& name) const { return f_.has(key(name)); }

uint64_t ConfigKeys::uint_or(const std::string& name, uint64_t fallback) const {
  return has(name) ? f_.get_uint(key(name)) : fallback;
}

int32_t ConfigKeys::positive_int(const std::string& name) const {
  const uint64_t v = f_.get_uint(key(name));
  if (v == 0 || v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    fail(name, "must be a positive 32-bit integer, got " + std::to_string(v));
  }
  return static_cast<int32_t>(v);
}

int32_t ConfigKeys::positive_int(const std::string& name, int32_t fallback) const {
  return has(name) ? positive_int(name) : fallback;
}

float ConfigKeys::positive_float(const std::string& name) const {
  const double v = f_.get_float(key(name));
  if (!(v > 0) || !std::isfinite(v)) fail(name, "must be a positive number, got " + std::to_string(v));
  return static_cast<float>(v);
}

float ConfigKeys::positive_float(const std::string& name, float fallback) const {
  return has(name) ? positive_float(name) : fallback;
}

float ConfigKeys::finite_float(const std::string& name, float fallback) const {
  if (!has(name)) return fallback;
  const double v = f_.get_float(key(name));
  if (!std::isfinite(v) || std::abs(v) > std::numeric_limits<float>::max()) {
    fail(name, "must be a finite number, got " + std::to_string(v));
  }
  return static_cast<float>(v);
}

std::string ConfigKeys::string(const std::string& name, const std::string& fallback) const {
  return f_.get_string(key(name), fallback);
}

void ConfigKeys::fail(const std::string& name, const std::string& msg) const {
  throw GgufError(f_.path() + ": " + key(name) + " " + msg);
}

}  // namespace flashserve
