// A thin vector layer over AVX-512, AVX2+FMA or plain scalars (picked at compile time).
// Every op is lane-wise or a fixed reduction tree, so a value computed through it depends only on
// its inputs -- never on where a loop or a thread split the data. Partial loads zero-fill, so tails
// go through the same code as full vectors.
#pragma once
#include "kernels/cpu/isa_namespace.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#if defined(__AVX512F__) || defined(__AVX2__)
// GCC 12's AVX-512 headers trip its own -Wuninitialized (_mm512_undefined_*, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)  // a GCC-only warning (clang builds the fuzz targets)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#if defined(__AVX512F__) && defined(__F16C__)
#define FLASHSERVE_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define FLASHSERVE_AVX2 1
#endif

namespace flashserve::kernels::FLASHSERVE_ISA::simd {

#if defined(FLASHSERVE_AVX512)

using V = __m512;
inline constexpr int W = 16;
inline __mmask16 lanes(int n) { return __mmask16((1u << std::clamp(n, 0, W)) - 1); }
inline V zero() { return _mm512_setzero_ps(); }
inline V set1(float a) { return _mm512_set1_ps(a); }
inline V load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V load_partial(const float* p, int n) { return _mm512_maskz_loadu_ps(lanes(n), p); }
inline void store_partial(float* p, V v, int n) { _mm512_mask_storeu_ps(p, lanes(n), v); }
inline V add(V a, V b) { return _mm512_add_ps(a, b); }
inline V sub(V a, V b) { return _mm512_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm512_mul_ps(a, b); }
inline V div(V a, V b) { return _mm512_div_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V max(V a, V b) { return _mm512_max_ps(a, b); }
inline V min(V a, V b) { return _mm512_min_ps(a, b); }
inline float reduce_add(V v) { return _mm512_reduce_add_ps(v); }
inline float reduce_max(V v) { return _mm512_reduce_max_ps(v); }
inline V round_nearest(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V keep_nan(V x, V r) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x); }
// p * 2^n with scalef, which handles overflow to inf and underflow through subnormals to 0.
inline V ldexp(V p, V n) { return _mm512_scalef_ps(p, n); }
inline constexpr float kExpMin = -104.0f, kExpMax = 89.0f;

#elif defined(FLASHSERVE_AVX2)

using V = __m256;
inline constexpr int W = 8;
inline __m256i lanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline V zero() { return _mm256_setzero_ps(); }
inline V set1(float a) { return _mm256_set1_ps(a); }
inline V load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v); }
inline V load_partial(const float* p, int n) { return _mm256_maskload_ps(p, lanes(n)); }
inline void store_partial(float* p, V v, int n) { _mm256_maskstore_ps(p, lanes(n), v); }
inline V add(V a, V b) { return _mm256_add_ps(a, b); }
inline V sub(V a, V b) { return _mm256_sub_ps(a, b); }
inline V mul(V a, V b) { return _mm256_mul_ps(a, b); }
inline V div(V a, V b) { return _mm256_div_ps(a, b); }
inline V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
inline V max(V a, V b) { return _mm256_max_ps(a, b); }
inline V min(V a, V b) { return _mm256_min_ps(a, b); }
inline float reduce_add(V v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
inline float reduce_max(V v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
inline V round_nearest(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V keep_nan(V x, V r) { return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
inline V pow2(__m256i n) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23)); }
// p * 2^n in two normal-range steps, so n in [-150, 128] neither wraps the exponent nor skips
// gradual underflow.
inline V ldexp(V p, V n) {
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  return mul(mul(p, pow2(half)), pow2(_mm256_sub_epi32(ni, half)));
}
inline constexpr float kExpMin = -104.0f, kExpMax = 89.0f;

#else

using V = float;
inline constexpr int W = 1;
inline V zero() { return 0.0f; }
inline V set1(float a) { return a; }
inline V load(const float* p) { return *p; }
inline void store(float* p, V v) { *p = v; }
inline V load_partial(const float* p, int n) { return n > 0 ? *p : 0.0f; }
inline void store_partial(float* p, V v, int n) { if (n > 0) *p = v; }
inline V add(V a, V b) { return a + b; }
inline V sub(V a, V b) { return a - b; }
inline V mul(V a, V b) { return a * b; }
inline V div(V a, V b) { return a / b; }
inline V fma(V a, V b, V c) { return a * b + c; }
inline V max(V a, V b) { return a > b ? a : b; }
inline float reduce_add(V v) { return v; }
inline float reduce_max(V v) { return v; }

#endif

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
// Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial for e^r (about 1 ulp).
inline V exp(V x) {
  const V xcl = min(set1(kExpMax), max(set1(kExpMin), x));
  const V n = round_nearest(mul(xcl, set1(1.44269504088896341f)));
  V r = fma(n, set1(-0.693359375f), xcl);
  r = fma(n, set1(2.12194440e-4f), r);
  V p = set1(1.9875691500e-4f);
  p = fma(p, r, set1(1.3981999507e-3f));
  p = fma(p, r, set1(8.3334519073e-3f));
  p = fma(p, r, set1(4.1665795894e-2f));
  p = fma(p, r, set1(1.6666665459e-1f));
  p = fma(p, r, set1(5.0000001201e-1f));
  p = add(fma(p, mul(r, r), r), set1(1.0f));
  return keep_nan(x, ldexp(p, n));
}
#else
inline V exp(V x) { return std::exp(x); }
#endif

// Loads/stores the n (possibly more than W) floats at p, only going masked on a short tail.
inline V load_upto(const float* p, int64_t n) { return n >= W ? load(p) : load_partial(p, int(n)); }
inline void store_upto(float* p, V v, int64_t n) {
  if (n >= W) store(p, v); else store_partial(p, v, int(n));
}

inline float max_of(const float* x, int64_t n) {
  V m = set1(-INFINITY);
  int64_t i = 0;
  for (; i + W <= n; i += W) m = max(m, load(x + i));
  float r = reduce_max(m);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

// x[i] = exp(x[i] - mx) in place; returns their sum, always added in the same order for a given n
// (softmax and attention rely on that for run-to-run identical rows). Lanes sum runs of kFold
// vectors in f32, folded into a double so vocab-sized rows keep f32 accuracy even when W is 1.
inline float exp_sub_sum(float* x, int64_t n, float mx) {
  constexpr int64_t kFold = 64 * W;
  const V vmx = set1(mx);
  double total = 0.0;
  V part = zero();
  for (int64_t i = 0; i < n; i += W) {
    const V e = exp(sub(load_upto(x + i, n - i), vmx));
    store_upto(x + i, e, n - i);
    part = add(part, n - i >= W ? e : load_partial(x + i, int(n - i)));
    if ((i + W) % kFold == 0) { total += reduce_add(part); part = zero(); }
  }
  return float(total + reduce_add(part));
}

inline void scale_inplace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; i += W) store_upto(x + i, mul(load_upto(x + i, n - i), set1(s)), n - i);
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA::simd
