#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

constexpr DType kAllTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q8_0};

bool quantized(DType t) { return block_elems(t) > 1; }

// n_out rows of k elements in type t; each row gets its own range and offset so scales differ.
std::vector<uint8_t> random_weights(std::mt19937& rng, DType t, int64_t n_out, int64_t k) {
  const size_t rb = row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::uniform_real_distribution<float> scale(0.05f, 2.0f), shift(-0.5f, 0.5f);
  for (int64_t o = 0; o < n_out; ++o) {
    const float s = scale(rng), c = shift(rng);
    auto row = random_floats(rng, size_t(k), c - s, c + s);
    quantize_row(t, row.data(), w.data() + o * rb, k);
  }
  return w;
}

std::vector<float> run(const std::vector<float>& x, int64_t nt, int64_t k, const std::vector<uint8_t>& w, DType t,
                       int64_t n_out) {
  std::vector<float> y(size_t(nt * n_out), NAN);
  matmul(x.data(), nt, k, w.data(), t, n_out, y.data());
  return y;
}

struct Shape { int64_t nt, k, n_out; };

// Covers 1..9 tokens (full token tiles plus every remainder), n_out off the row-tile multiples, and
// k from one block to the model's ffn width; float types add k that are not whole 32-blocks.
constexpr Shape kShapes[] = {{1, 32, 1}, {1, 576, 67}, {3, 96, 5}, {7, 1536, 33}, {4, 64, 8},
                             {5, 160, 9}, {9, 576, 3}, {2, 1536, 17}, {64, 576, 13}};
constexpr Shape kOddKShapes[] = {{1, 1, 3}, {1, 7, 5}, {3, 37, 11}, {7, 100, 4}, {2, 575, 6}};

void expect_matches_reference(std::mt19937& rng, DType t, const Shape& s) {
  const auto w = random_weights(rng, t, s.n_out, s.k);
  const auto x = random_floats(rng, size_t(s.nt * s.k), -2.0f, 2.0f);
  const auto y = run(x, s.nt, s.k, w, t, s.n_out);
  const auto ref = ref_matmul(x.data(), s.nt, s.k, w.data(), t, s.n_out);
  for (size_t i = 0; i < y.size(); ++i) {
    // Rounding error of an f32 dot product scales with sum |x w|, not with |result|.
    ASSERT_LE(std::fabs(y[i] - ref.y[i]), 1e-5 * ref.abs_sum[i] + 1e-30)
        << dtype_name(t) << " nt=" << s.nt << " k=" << s.k << " n_out=" << s.n_out << " at " << i
        << ": got " << y[i] << " want " << ref.y[i];
  }
}

TEST(Matmul, MatchesF64ReferenceOfDequantizedWeights) {
  std::mt19937 rng(21);
  for (DType t : kAllTypes) {
    for (const Shape& s : kShapes) expect_matches_reference(rng, t, s);
    if (!quantized(t))
      for (const Shape& s : kOddKShapes) expect_matches_reference(rng, t, s);
  }
}

TEST(Matmul, ZeroRowsGiveZero) {
  std::mt19937 rng(22);
  for (DType t : kAllTypes) {
    std::vector<float> zeros(64, 0.0f);
    std::vector<uint8_t> w(row_bytes(t, 64) * 2);
    quantize_row(t, zeros.data(), w.data(), 64);
    const auto other = random_floats(rng, 64);
    quantize_row(t, other.data(), w.data() + row_bytes(t, 64), 64);
    const auto x = random_floats(rng, 64);
    const auto y = run(x, 1, 64, w, t, 2);
    EXPECT_EQ(y[0], 0.0f) << dtype_name(t);
    EXPECT_NE(y[1], 0.0f) << dtype_name(t);
  }
}

void expect_bit_equal(const float* a, const float* b, int64_t n, const std::string& what) {
  ASSERT_EQ(std::memcmp(a, b, size_t(n) * sizeof(float)), 0) << what;
}

// A token's outputs must not depend on how many tokens share the call, where it sits among them,
// or on the thread count.
TEST(Matmul, BatchAndThreadInvariant) {
  std::mt19937 rng(23);
  const int saved_threads = num_threads();
  for (DType t : kAllTypes) {
    for (int64_t k : {int64_t(576), int64_t(quantized(t) ? 96 : 100)}) {
      const int64_t n_out = 67, nt = 7;
      const auto w = random_weights(rng, t, n_out, k);
      const auto x = random_floats(rng, size_t(nt * k), -3.0f, 3.0f);
      const std::string tag = std::string(dtype_name(t)) + " k=" + std::to_string(k);
      set_num_threads(2);
      const auto y7 = run(x, nt, k, w, t, n_out);
      // The same tokens reversed, inside a 9-token batch padded with other tokens.
      auto x9 = random_floats(rng, size_t(9 * k), -3.0f, 3.0f);
      for (int64_t i = 0; i < nt; ++i) std::memcpy(&x9[(8 - i) * k], &x[i * k], size_t(k) * 4);
      const auto y9 = run(x9, 9, k, w, t, n_out);
      for (int64_t i = 0; i < nt; ++i) {
        const std::vector<float> xi(x.begin() + i * k, x.begin() + (i + 1) * k);
        const auto y1 = run(xi, 1, k, w, t, n_out);
        expect_bit_equal(&y7[i * n_out], y1.data(), n_out, tag + " token " + std::to_string(i) + " of 7 vs alone");
        expect_bit_equal(&y9[(8 - i) * n_out], y1.data(), n_out, tag + " token in 9-batch vs alone");
      }
      set_num_threads(1);
      expect_bit_equal(run(x, nt, k, w, t, n_out).data(), y7.data(), nt * n_out, tag + " 1 vs 2 threads");
      set_num_threads(3);
      expect_bit_equal(run(x, nt, k, w, t, n_out).data(), y7.data(), nt * n_out, tag + " 3 vs 2 threads");
    }
  }
  set_num_threads(saved_threads);
}

TEST(Matmul, GetRowDecodesOneRow) {
  std::mt19937 rng(24);
  for (DType t : kAllTypes) {
    const int64_t k = 96, n_out = 5;
    const auto w = random_weights(rng, t, n_out, k);
    std::vector<float> out(k);
    get_row(w.data(), t, k, 3, out.data());
    const auto ref = ref_dequant(t, w.data() + 3 * row_bytes(t, k), k);
    double row_max = 0;
    for (double v : ref) row_max = std::max(row_max, std::fabs(v));
    for (int64_t i = 0; i < k; ++i)
      ASSERT_LE(std::fabs(out[i] - ref[i]), 1e-6 * row_max) << dtype_name(t) << " element " << i;
  }
}

// A gather is get_row per id: bit for bit, with repeated and out-of-order ids, in batches large
// enough to go parallel; n = 0 writes nothing.
TEST(Matmul, GetRowsEqualsGetRowPerId) {
  std::mt19937 rng(25);
  for (DType t : kAllTypes) {
    for (int64_t k : {int64_t(96), int64_t(576), int64_t(quantized(t) ? 32 : 37)}) {
      const int64_t n_rows = 11;
      const auto w = random_weights(rng, t, n_rows, k);
      for (int64_t n : {0, 1, 5, 300}) {
        std::vector<int32_t> ids(static_cast<size_t>(n));
        std::uniform_int_distribution<int32_t> pick(0, int32_t(n_rows - 1));
        for (int32_t& id : ids) id = pick(rng);
        std::vector<float> out(size_t(n * k) + 1, NAN), want(static_cast<size_t>(k));
        out.back() = 12345.0f;  // a sentinel past the last row
        get_rows(w.data(), t, k, ids.data(), n, out.data());
        for (int64_t i = 0; i < n; ++i) {
          get_row(w.data(), t, k, ids[i], want.data());
          expect_bit_equal(&out[i * k], want.data(), k,
                           std::string(dtype_name(t)) + " k=" + std::to_string(k) + " row " + std::to_string(i));
        }
        ASSERT_EQ(out.back(), 12345.0f) << dtype_name(t) << " wrote past n rows";
      }
    }
  }
  std::vector<uint8_t> w(row_bytes(DType::Q8_0, 64));
  std::vector<float> out(48);
  const int32_t id = 0;
  EXPECT_THROW(get_rows(w.data(), DType::Q8_0, 48, &id, 1, out.data()), std::invalid_argument);
}

TEST(Matmul, RejectsPartialQuantBlocks) {
  std::vector<float> x(48), y(1);
  std::vector<uint8_t> w(64);
  EXPECT_THROW(matmul(x.data(), 1, 48, w.data(), DType::Q4_1, 1, y.data()), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve::test
