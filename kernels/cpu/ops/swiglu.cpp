#include "kernels/swiglu.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>

#include "kernels/cpu/simd.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using namespace simd;

// Elements per parallel chunk; whole vectors, so chunks start lane-aligned.
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

void geglu_span(const float* gate, const float* up, float* out, int64_t n) {
  const V one = set1(1.0f), minus_two_k = set1(-2.0f * 0.7978845608028654f), cubic = set1(0.044715f);
  for (int64_t i = 0; i < n; i += W) {
    const V g = load_upto(gate + i, n - i);
    const V y = fma(cubic, mul(mul(g, g), g), g);
    const V gelu = div(g, add(one, exp(mul(minus_two_k, y))));
    store_upto(out + i, mul(gelu, load_upto(up + i, n - i)), n - i);
  }
}

// span over chunks of kChunk elements in parallel. Each element is a lane-wise function of its
// inputs, so chunking cannot change a result.
void by_chunks(const float* gate, const float* up, float* out, int64_t n,
               void (*span)(const float*, const float*, float*, int64_t)) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  parallel_for(chunks, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) {
      const int64_t begin = c * kChunk;
      span(gate + begin, up + begin, out + begin, std::min(kChunk, n - begin));
    }
  });
}

}  // namespace

void swiglu(const float* gate, const float* up, float* out, int64_t n) { by_chunks(gate, up, out, n, swiglu_span); }

// GELU's tanh form through exp: 0.5 (1 + tanh y) = 1 / (1 + e^-2y), so gelu(g) = g / (1 + e^-2y) with
// y = sqrt(2/pi) (g + 0.044715 g^3): simd::exp's bits on every copy, where libm's tanhf may differ by
// machine.
void geglu(const float* gate, const float* up, float* out, int64_t n) { by_chunks(gate, up, out, n, geglu_span); }

}  // namespace flashserve::kernels::FLASHSERVE_ISA
