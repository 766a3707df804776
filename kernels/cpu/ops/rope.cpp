#include "kernels/rope.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/portable_math.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

void check_params(const RopeParams& p, int64_t head_dim) {
  if (p.rot_dim < 0 || p.rot_dim % 2 != 0 || p.rot_dim > head_dim)
    throw std::invalid_argument("rope: rot_dim must be even and within head_dim");
}

// Rotates the first 2 * cos.size() dims of every head of one token: pair i is (2i, 2i + 1), or
// (i, i + pairs) in the neox layout.
void rotate_token(float* x, int64_t num_heads, int64_t head_dim, const std::vector<float>& cos,
                  const std::vector<float>& sin, bool neox) {
  const size_t pairs = cos.size();
  const size_t step = neox ? 1 : 2, partner = neox ? pairs : 1;
  for (int64_t h = 0; h < num_heads; ++h) {
    float* v = x + h * head_dim;
    for (size_t i = 0; i < pairs; ++i) {
      float* a = v + step * i;
      const float x0 = a[0], x1 = a[partner];
      a[0] = x0 * cos[i] - x1 * sin[i];
      a[partner] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace

void rope(float* x, const int32_t* positions, int64_t num_tokens, int64_t num_heads, int64_t head_dim,
          const RopeParams& p) {
  check_params(p, head_dim);
  const int64_t pairs = p.rot_dim / 2;
  if (pairs == 0) return;
  // Angles in double: near position 30000 an f32 angle only resolves ~0.002 rad. cos/sin per
  // (token, pair) are shared by all heads, computed without libm (portable_math.h says why).
  const double log_theta = portable::log(double(p.theta_base));
  std::vector<double> freq(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    freq[i] = double(p.freq_scale) * portable::exp(-2.0 * double(i) / double(p.rot_dim) * log_theta);
    if (p.freq_factors) freq[i] /= double(p.freq_factors[i]);
  }
  parallel_for(
      num_tokens,
      [&](int64_t begin, int64_t end) {
        std::vector<float> cos(static_cast<size_t>(pairs)), sin(static_cast<size_t>(pairs));
        for (int64_t t = begin; t < end; ++t) {
          for (int64_t i = 0; i < pairs; ++i) {
            double s = 0.0, c = 0.0;
            portable::sincos(double(positions[t]) * freq[i], s, c);
            cos[i] = float(c);
            sin[i] = float(s);
          }
          rotate_token(x + t * num_heads * head_dim, num_heads, head_dim, cos, sin, p.neox);
        }
      },
      num_tokens * num_heads * head_dim >= (1 << 15));
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
