// A thin vector layer over AVX-512, AVX2+FMA or plain scalars (picked at compile time), with one
// contract for all three: a vector is 16 float lanes in every copy (AVX2 holds two halves, the
// scalar copy an array), every op is lane-wise IEEE arithmetic (fma rounds once everywhere, see
// fused_mul_add.h) or one fixed reduction tree, and exp is one polynomial. So a value computed
// through it is the same bits on every CPU, never depending on where a loop or a thread split the
// data. Partial loads zero-fill, so tails go through the same code as full vectors.
#pragma once
#include "kernels/cpu/fused_mul_add.h"
#include "kernels/cpu/isa_namespace.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
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

inline constexpr int W = 16;
// exp's range: below kExpMin the result is 0, above kExpMax inf (after rounding).
inline constexpr float kExpMin = -104.0f, kExpMax = 89.0f;

// One lane of the vector ops below, for a single float: the scalar copy runs them 16 times per
// vector, and the vector copies' instructions compute exactly them.
inline float add(float a, float b) { return a + b; }
inline float mul(float a, float b) { return a * b; }
inline float fma(float a, float b, float c) { return fused_mul_add(a, b, c); }
inline float max(float a, float b) { return a > b ? a : b; }  // maxps: b unless a > b
inline float min(float a, float b) { return a < b ? a : b; }  // minps: b unless a < b
inline float round_nearest(float v) { return std::nearbyint(v); }
inline float keep_nan(float x, float r) { return x != x ? x : r; }
inline float pow2(int e) {  // 2^e for e in [-126, 127]
  const uint32_t bits = uint32_t(e + 127) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// p * 2^n in two normal-range steps, so n in [-150, 128] neither wraps the exponent nor skips
// gradual underflow: the first product is exact, the second rounds once (as AVX-512's scalef).
inline float ldexp(float p, float n) {
  if (n != n) return n;
  const int ni = int(n), half = ni >> 1;
  return (p * pow2(half)) * pow2(ni - half);
}

#if defined(FLASHSERVE_AVX512)

using V = __m512;
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
inline V round_nearest(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V keep_nan(V x, V r) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, x); }
inline V ldexp(V p, V n) { return _mm512_scalef_ps(p, n); }
// Lanes i and i + 8 added: the first level of every reduction tree.
inline __m256 fold(V v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
inline __m256 fold_max(V v) { return _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

#elif defined(FLASHSERVE_AVX2)

struct V {
  __m256 lo, hi;  // lanes 0-7, 8-15
};
inline __m256i lanes8(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline V zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V set1(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline V load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline void store(float* p, V v) { _mm256_storeu_ps(p, v.lo); _mm256_storeu_ps(p + 8, v.hi); }
inline V load_partial(const float* p, int n) {
  return {_mm256_maskload_ps(p, lanes8(n)), _mm256_maskload_ps(p + 8, lanes8(n - 8))};
}
inline void store_partial(float* p, V v, int n) {
  _mm256_maskstore_ps(p, lanes8(n), v.lo);
  _mm256_maskstore_ps(p + 8, lanes8(n - 8), v.hi);
}
inline V add(V a, V b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V sub(V a, V b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V mul(V a, V b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V div(V a, V b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V fma(V a, V b, V c) { return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)}; }
inline V max(V a, V b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V min(V a, V b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline __m256 round8(__m256 v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline V round_nearest(V v) { return {round8(v.lo), round8(v.hi)}; }
inline __m256 keep_nan8(__m256 x, __m256 r) { return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q)); }
inline V keep_nan(V x, V r) { return {keep_nan8(x.lo, r.lo), keep_nan8(x.hi, r.hi)}; }
inline __m256 pow2(__m256i n) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23)); }
inline __m256 ldexp8(__m256 p, __m256 n) {  // ldexp(float, float), eight at a time
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i half = _mm256_srai_epi32(ni, 1);
  return _mm256_mul_ps(_mm256_mul_ps(p, pow2(half)), pow2(_mm256_sub_epi32(ni, half)));
}
inline V ldexp(V p, V n) { return {ldexp8(p.lo, n.lo), ldexp8(p.hi, n.hi)}; }
inline __m256 fold(V v) { return _mm256_add_ps(v.lo, v.hi); }
inline __m256 fold_max(V v) { return _mm256_max_ps(v.lo, v.hi); }

#else

struct V {
  float l[W];
};
template <class F>
inline V each(F&& f) {
  V r;
  for (int i = 0; i < W; ++i) r.l[i] = f(i);
  return r;
}
inline V zero() { return each([](int) { return 0.0f; }); }
inline V set1(float a) { return each([a](int) { return a; }); }
inline V load(const float* p) { return each([p](int i) { return p[i]; }); }
inline void store(float* p, V v) { std::copy(v.l, v.l + W, p); }
inline V load_partial(const float* p, int n) { return each([p, n](int i) { return i < n ? p[i] : 0.0f; }); }
inline void store_partial(float* p, V v, int n) { std::copy(v.l, v.l + std::clamp(n, 0, W), p); }
inline V add(V a, V b) { return each([&](int i) { return a.l[i] + b.l[i]; }); }
inline V sub(V a, V b) { return each([&](int i) { return a.l[i] - b.l[i]; }); }
inline V mul(V a, V b) { return each([&](int i) { return a.l[i] * b.l[i]; }); }
inline V div(V a, V b) { return each([&](int i) { return a.l[i] / b.l[i]; }); }
inline V fma(V a, V b, V c) { return each([&](int i) { return fused_mul_add(a.l[i], b.l[i], c.l[i]); }); }
inline V max(V a, V b) { return each([&](int i) { return max(a.l[i], b.l[i]); }); }
inline V min(V a, V b) { return each([&](int i) { return min(a.l[i], b.l[i]); }); }
inline V round_nearest(V v) { return each([&](int i) { return round_nearest(v.l[i]); }); }
inline V keep_nan(V x, V r) { return each([&](int i) { return keep_nan(x.l[i], r.l[i]); }); }
inline V ldexp(V p, V n) { return each([&](int i) { return ldexp(p.l[i], n.l[i]); }); }

#endif

#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
// The tree after the first fold: adjacent pairs, then adjacent pairs of those, then the two halves:
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
inline float tree8(__m256 s) {
  const __m256 pairs = _mm256_hadd_ps(s, s);
  const __m256 h = _mm256_hadd_ps(pairs, pairs);
  return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}
inline float reduce_add(V v) { return tree8(fold(v)); }
// out[i] = reduce_add(v[i]) for i < n, four trees side by side: after the first fold, hadd pairs
// neighbouring lanes of two vectors at once (a quarter of the shuffles of four reduce_adds).
inline void reduce_add_many(const V* v, int n, float* out) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(fold(v[i]), fold(v[i + 1])), _mm256_hadd_ps(fold(v[i + 2]), fold(v[i + 3])));
    _mm_storeu_ps(out + i, _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
  }
  for (; i < n; ++i) out[i] = reduce_add(v[i]);
}
inline float reduce_max(V v) {
  const __m256 s = fold_max(v);
  const __m128 q = _mm_max_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  const __m128 d = _mm_max_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_max_ss(d, _mm_movehdup_ps(d)));
}
#else
// The vector copies' trees, written out: lanes i and i + 8, then as tree8.
inline float reduce_add(V v) {
  float s[8];
  for (int i = 0; i < 8; ++i) s[i] = v.l[i] + v.l[i + 8];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
// max is exact, so only the tree's treatment of NaN and signed zeros must follow the vector one:
// lanes (i, i + 8), then (i, i + 4), (i, i + 2), (0, 1), each as maxps(a, b).
inline float reduce_max(V v) {
  float s[8];
  for (int i = 0; i < 8; ++i) s[i] = max(v.l[i], v.l[i + 8]);
  for (int i = 0; i < 4; ++i) s[i] = max(s[i], s[i + 4]);
  for (int i = 0; i < 2; ++i) s[i] = max(s[i], s[i + 2]);
  return max(s[0], s[1]);
}
inline void reduce_add_many(const V* v, int n, float* out) {
  for (int i = 0; i < n; ++i) out[i] = reduce_add(v[i]);
}
#endif

// Cephes expf: x = n ln2 + r with |r| <= ln2/2, degree-6 polynomial for e^r (about 1 ulp). One body
// for a float and for a vector (T is float or V), so no copy's exp can part from another's.
template <class T>
inline T exp_of(T x) {
  const auto c = [](float v) {
    if constexpr (std::is_same_v<T, float>) return v; else return set1(v);
  };
  const T xcl = min(c(kExpMax), max(c(kExpMin), x));
  const T n = round_nearest(mul(xcl, c(1.44269504088896341f)));
  T r = fma(n, c(-0.693359375f), xcl);
  r = fma(n, c(2.12194440e-4f), r);
  T p = c(1.9875691500e-4f);
  p = fma(p, r, c(1.3981999507e-3f));
  p = fma(p, r, c(8.3334519073e-3f));
  p = fma(p, r, c(4.1665795894e-2f));
  p = fma(p, r, c(1.6666665459e-1f));
  p = fma(p, r, c(5.0000001201e-1f));
  p = add(fma(p, mul(r, r), r), c(1.0f));
  return keep_nan(x, ldexp(p, n));
}
inline float exp(float x) { return exp_of(x); }
inline V exp(V x) { return exp_of(x); }

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
