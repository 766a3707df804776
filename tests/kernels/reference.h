// Plain double-precision reference implementations for the kernel tests, written from the format
// and op definitions alone (no code shared with kernels/cpu), plus random-input helpers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/paged_attention.h"
#include "tests/kernels/reference_quants.h"

namespace flashserve::test {

using kernels::DType;

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
inline double ref_half(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double mag;
  if (exp == 0x1f) mag = mant ? NAN : INFINITY;
  else if (exp == 0) mag = std::ldexp(double(mant), -24);
  else mag = std::ldexp(double(1024 + mant), exp - 25);
  return sign ? -mag : mag;
}

inline double ref_bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// E4M3 from its definition: code e m (no sign) is (1 + m/8) 2^(e-7), or m 2^-9 for e = 0; 0x7f NaN.
inline double ref_e4m3(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double mag = (code & 0x7f) == 0x7f ? NAN : e == 0 ? m * std::ldexp(1.0, -9) : (1 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (code & 0x80) ? -mag : mag;
}

inline uint16_t read_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }

// Row of n elements decoded from raw GGUF bytes per the GGML block layouts.
inline std::vector<double> ref_dequant(DType t, const void* src, int64_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / 32, j = i % 32;
    switch (t) {
      case DType::F32: { float f; std::memcpy(&f, p + 4 * i, 4); out[i] = f; break; }
      case DType::F16: out[i] = ref_half(read_u16(p + 2 * i)); break;
      case DType::BF16: out[i] = ref_bf16(read_u16(p + 2 * i)); break;
      case DType::F8_E4M3: out[i] = ref_e4m3(p[i]); break;
      case DType::Q4_0: {
        const uint8_t* blk = p + 18 * b;
        const int q = j < 16 ? (blk[2 + j] & 0xf) : (blk[2 + j - 16] >> 4);
        out[i] = ref_half(read_u16(blk)) * (q - 8);
        break;
      }
      case DType::Q4_1: {
        const uint8_t* blk = p + 20 * b;
        const int q = j < 16 ? (blk[4 + j] & 0xf) : (blk[4 + j - 16] >> 4);
        out[i] = ref_half(read_u16(blk)) * q + ref_half(read_u16(blk + 2));
        break;
      }
      case DType::Q8_0: {
        const uint8_t* blk = p + 34 * b;
        out[i] = ref_half(read_u16(blk)) * double(int8_t(blk[2 + j]));
        break;
      }
      case DType::Q5_0:
      case DType::Q5_1:
      case DType::IQ4_NL:
      case DType::Q2_K:
      case DType::Q3_K:
      case DType::Q4_K:
      case DType::Q5_K:
      case DType::Q6_K:
      case DType::Q8_K:
      case DType::IQ4_XS: out[i] = ref_quants::elem(t, p, i); break;
    }
  }
  return out;
}

// y[t][o] = sum_k x[t][k] W[o][k] in double; also returns sum_k |x w| per output, the scale
// against which a float accumulation's rounding error is measured.
struct RefMatmul {
  std::vector<double> y, abs_sum;
};

inline RefMatmul ref_matmul(const float* x, int64_t nt, int64_t k, const void* w, DType t, int64_t n_out) {
  RefMatmul r{std::vector<double>(size_t(nt * n_out)), std::vector<double>(size_t(nt * n_out))};
  const size_t rb = kernels::row_bytes(t, k);
  for (int64_t o = 0; o < n_out; ++o) {
    const auto wr = ref_dequant(t, static_cast<const uint8_t*>(w) + o * rb, k);
    for (int64_t tok = 0; tok < nt; ++tok) {
      double s = 0, a = 0;
      for (int64_t i = 0; i < k; ++i) {
        s += double(x[tok * k + i]) * wr[i];
        a += std::fabs(double(x[tok * k + i]) * wr[i]);
      }
      r.y[tok * n_out + o] = s;
      r.abs_sum[tok * n_out + o] = a;
    }
  }
  return r;
}

inline std::vector<double> ref_rmsnorm(const float* x, const float* w, int64_t rows, int64_t dim, float eps) {
  std::vector<double> y(size_t(rows * dim));
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
    const double inv = 1.0 / std::sqrt(ss / double(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) y[r * dim + i] = x[r * dim + i] * inv * w[i];
  }
  return y;
}

inline double ref_silu_mul(double g, double u) { return g / (1.0 + std::exp(-g)) * u; }

inline std::vector<double> ref_softmax(const float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(x[i]));
  std::vector<double> p(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i] = std::exp(double(x[i]) - mx);
  for (double& v : p) v /= sum;
  return p;
}

// Attention of one query row over contiguous K/V rows [ctx][head_dim] (one KV head's slice).
inline std::vector<double> ref_attention_row(const float* q, const std::vector<const float*>& krows,
                                             const std::vector<const float*>& vrows, int64_t hd, double scale) {
  std::vector<double> s(krows.size());
  double mx = -INFINITY;
  for (size_t j = 0; j < krows.size(); ++j) {
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) d += double(q[i]) * krows[j][i];
    s[j] = scale * d;
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  for (double& v : s) sum += v = std::exp(v - mx);
  std::vector<double> out(size_t(hd), 0.0);
  for (size_t j = 0; j < krows.size(); ++j)
    for (int64_t i = 0; i < hd; ++i) out[i] += s[j] / sum * vrows[j][i];
  return out;
}

// Host arrays behind a kernels::AttentionBatch, built a sequence at a time.
struct AttentionArrays {
  std::vector<int32_t> query_start{0}, context_lens, flat_tables, table_rows;
  std::vector<std::vector<int32_t>> tables;

  void add(int32_t num_queries, int32_t context_len, std::vector<int32_t> table) {
    query_start.push_back(query_start.back() + num_queries);
    context_lens.push_back(context_len);
    tables.push_back(std::move(table));
  }
  // Valid while this object lives and add() is not called again.
  kernels::AttentionBatch batch() {
    size_t stride = 1;
    for (const auto& t : tables) stride = std::max(stride, t.size());
    flat_tables.assign(stride * tables.size(), 0);
    for (size_t s = 0; s < tables.size(); ++s) std::copy(tables[s].begin(), tables[s].end(), flat_tables.begin() + s * stride);
    kernels::AttentionBatch b;
    b.query_start = query_start.data();
    b.context_lens = context_lens.data();
    b.block_tables = flat_tables.data();
    b.num_seqs = int32_t(tables.size());
    b.max_blocks_per_seq = int32_t(stride);
    for (size_t s = 0; s < tables.size(); ++s) {
      b.max_num_queries = std::max(b.max_num_queries, query_start[s + 1] - query_start[s]);
      b.max_context_len = std::max(b.max_context_len, context_lens[s]);
    }
    return b;
  }
  // The same tables as a runner that keeps each sequence's row across steps holds them
  // (AttentionBatch::table_rows): sequence s in row 2 * (n - 1 - s) + 1, the rows between naming
  // only sequence 0's first block, so reading another row than its own changes a sequence's result.
  kernels::AttentionBatch resident_batch() {
    kernels::AttentionBatch b = batch();
    const size_t n = tables.size(), stride = size_t(b.max_blocks_per_seq);
    flat_tables.assign(2 * n * stride, tables[0].empty() ? 0 : tables[0][0]);
    table_rows.clear();
    for (size_t s = 0; s < n; ++s) {
      table_rows.push_back(int32_t(2 * (n - 1 - s) + 1));
      std::copy(tables[s].begin(), tables[s].end(), flat_tables.begin() + ptrdiff_t(size_t(table_rows.back()) * stride));
    }
    b.block_tables = flat_tables.data();
    b.table_rows = table_rows.data();
    return b;
  }
};

}  // namespace flashserve::test
