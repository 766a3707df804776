#include "kernels/swiglu.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using namespace simd;

// Elements per parallel chunk; a multiple of every vector width so chunks start lane-aligned.
constexpr int64_t kChunk = 4096;

void swiglu_span(const float* gate, const float* up, float* out, int64_t n) {
  const V one = set1(1.0f);
  for (int64_t i = 0; i < n; i += W) {
    const V g = load_upto(gate + i, n - i);
    const V u = load_upto(up + i, n - i);
    const V silu = div(g, add(one, exp(sub(zero(), g))));
    store_upto(out + i, mul(silu, u), n - i);
  }
}

}  // namespace

// Each element is a lane-wise function of its inputs, so chunking cannot change a result.
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t begin = c * kChunk;
      swiglu_span(gate + begin, up + begin, out + begin, std::min(kChunk, n - begin));
    }
  });
}

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  parallel_for(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const float g = gate[i];
          out[i] = 0.5f * g * (1.0f + std::tanh(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
        }
      },
      n > kChunk);
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
