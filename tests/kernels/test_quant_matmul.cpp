// matmul, get_row and get_rows over the K-quant, Q5_x and IQ4 formats (test_matmul.cpp covers the
// float types, Q4_x and Q8_0 with the same contract).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "tests/kernels/quant_inputs.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

std::vector<float> run(const std::vector<float>& x, int64_t nt, int64_t k, const std::vector<uint8_t>& w, DType t,
                       int64_t n_out) {
  std::vector<float> y(size_t(nt * n_out), NAN);
  matmul(x.data(), nt, k, w.data(), t, n_out, y.data());
  return y;
}

void expect_bit_equal(const float* a, const float* b, int64_t n, const std::string& what) {
  ASSERT_EQ(std::memcmp(a, b, size_t(n) * sizeof(float)), 0) << what;
}

std::string tag(DType t, int64_t k) { return std::string(dtype_name(t)) + " k=" + std::to_string(k); }

// The weights a matmul sees are dequantize_row's bit for bit: against one-hot activations (the
// identity as x) each output is a single weight, exactly (0 * w and the sums of zeros are exact).
// Raw random blocks reach every quant value and scale code; two blocks per row, odd row count.
TEST(QuantMatmul, DecodesExactlyAsDequantizeRow) {
  std::mt19937 rng(41);
  for (DType t : kNewQuantTypes) {
    const int64_t k = 2 * block_elems(t), n_out = 7;
    const auto w = random_blocks(rng, t, 2 * n_out);
    std::vector<float> eye(size_t(k * k), 0.0f);
    for (int64_t i = 0; i < k; ++i) eye[size_t(i * k + i)] = 1.0f;
    const auto y = run(eye, k, k, w, t, n_out);  // y[i][o] = W[o][i]
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t o = 0; o < n_out; ++o) {
      dequantize_row(t, w.data() + o * row_bytes(t, k), row.data(), k);
      for (int64_t i = 0; i < k; ++i)
        ASSERT_EQ(y[size_t(i * n_out + o)], row[size_t(i)]) << tag(t, k) << " row " << o << " element " << i;
    }
  }
}

struct Shape { int64_t nt, k, n_out; };

// 1..9 tokens (full token tiles and every remainder), n_out off the row-tile multiples, one to
// eight super-blocks per row; the 32-element formats also get k that is not whole super-blocks.
constexpr Shape kShapes[] = {{1, 256, 1}, {1, 2048, 67}, {3, 512, 5},  {7, 768, 33},
                             {4, 256, 8}, {5, 1280, 9},  {9, 512, 3}, {2, 1536, 17}, {64, 512, 13}};
constexpr Shape kSmallBlockShapes[] = {{1, 32, 3}, {3, 96, 5}, {6, 576, 11}};

void expect_matches_reference(std::mt19937& rng, DType t, const Shape& s) {
  const auto w = quantized_rows(rng, t, s.n_out, s.k);
  const auto x = random_floats(rng, size_t(s.nt * s.k), -2.0f, 2.0f);
  const auto y = run(x, s.nt, s.k, w, t, s.n_out);
  const auto ref = ref_matmul(x.data(), s.nt, s.k, w.data(), t, s.n_out);
  for (size_t i = 0; i < y.size(); ++i) {
    // f32 rounding of the dot product scales with sum |x w|, not with |result| (as in test_matmul).
    ASSERT_LE(std::fabs(y[i] - ref.y[i]), 1e-5 * ref.abs_sum[i] + 1e-30)
        << tag(t, s.k) << " nt=" << s.nt << " n_out=" << s.n_out << " at " << i << ": got " << y[i]
        << " want " << ref.y[i];
  }
}

TEST(QuantMatmul, MatchesF64ReferenceOfDequantizedWeights) {
  std::mt19937 rng(42);
  for (DType t : kNewQuantTypes) {
    for (const Shape& s : kShapes) expect_matches_reference(rng, t, s);
    if (block_elems(t) == kQuantBlock)
      for (const Shape& s : kSmallBlockShapes) expect_matches_reference(rng, t, s);
  }
}

// A token's outputs must not depend on how many tokens share the call, where it sits among them,
// or on the thread count.
TEST(QuantMatmul, BatchAndThreadInvariant) {
  std::mt19937 rng(43);
  const int saved_threads = num_threads();
  for (DType t : kNewQuantTypes) {
    const int64_t k = 3 * kSuperBlock, n_out = 67, nt = 7;
    const auto w = quantized_rows(rng, t, n_out, k);
    const auto x = random_floats(rng, size_t(nt * k), -3.0f, 3.0f);
    set_num_threads(2);
    const auto y7 = run(x, nt, k, w, t, n_out);
    // The same tokens reversed, inside a 9-token batch padded with other tokens.
    auto x9 = random_floats(rng, size_t(9 * k), -3.0f, 3.0f);
    for (int64_t i = 0; i < nt; ++i) std::memcpy(&x9[size_t((8 - i) * k)], &x[size_t(i * k)], size_t(k) * 4);
    const auto y9 = run(x9, 9, k, w, t, n_out);
    for (int64_t i = 0; i < nt; ++i) {
      const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
      const auto y1 = run(xi, 1, k, w, t, n_out);
      expect_bit_equal(&y7[size_t(i * n_out)], y1.data(), n_out,
                       tag(t, k) + " token " + std::to_string(i) + " of 7 vs alone");
      expect_bit_equal(&y9[size_t((8 - i) * n_out)], y1.data(), n_out, tag(t, k) + " token in 9-batch vs alone");
    }
    set_num_threads(1);
    expect_bit_equal(run(x, nt, k, w, t, n_out).data(), y7.data(), nt * n_out, tag(t, k) + " 1 vs 2 threads");
    set_num_threads(3);
    expect_bit_equal(run(x, nt, k, w, t, n_out).data(), y7.data(), nt * n_out, tag(t, k) + " 3 vs 2 threads");
  }
  set_num_threads(saved_threads);
}

// get_row and a gather are dequantize_row per id, bit for bit, with repeated and out-of-order ids, in batches
// large enough to go parallel; n = 0 writes nothing.
TEST(QuantMatmul, GetRowsEqualsDequantizedRows) {
  std::mt19937 rng(44);
  for (DType t : kNewQuantTypes) {
    const int64_t k = 2 * kSuperBlock, n_rows = 11;
    const auto w = quantized_rows(rng, t, n_rows, k);
    for (int64_t n : {0, 1, 5, 300}) {
      std::vector<int32_t> ids(static_cast<size_t>(n));
      std::uniform_int_distribution<int32_t> pick(0, int32_t(n_rows - 1));
      for (int32_t& id : ids) id = pick(rng);
      std::vector<float> out(size_t(n * k) + 1, NAN), want(static_cast<size_t>(k));
      out.back() = 12345.0f;  // a sentinel past the last row
      get_rows(w.data(), t, k, ids.data(), n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        dequantize_row(t, w.data() + size_t(ids[size_t(i)]) * row_bytes(t, k), want.data(), k);
        expect_bit_equal(&out[size_t(i * k)], want.data(), k, tag(t, k) + " row " + std::to_string(i));
      }
      ASSERT_EQ(out.back(), 12345.0f) << dtype_name(t) << " wrote past n rows";
    }
    std::vector<float> got(static_cast<size_t>(k)), want(static_cast<size_t>(k));
    get_row(w.data(), t, k, 10, got.data());
    dequantize_row(t, w.data() + 10 * row_bytes(t, k), want.data(), k);
    expect_bit_equal(got.data(), want.data(), k, tag(t, k) + " get_row");
  }
}

}  // namespace
}  // namespace flashserve::test
