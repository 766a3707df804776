// Every compiled copy of the CPU ops (kernels/cpu_isa.h) that this machine runs against the scalar
// copy, op by op on the same inputs, bit for bit: the contract of kernels/cpu/simd.h and of the
// 8-bit matmul, which makes one request give the same tokens on every x86-64 CPU. The copies this
// CPU lacks are held to the same bits by the whole-model test (tests/model/test_cpu_copies_model.cpp)
// on the machines that have them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/matmul.h"
#include "tests/backend_ops/backend_cases.h"
#include "tests/kernels/reference.h"
#include "tests/util/bit_difference.h"

namespace flashserve::test {
namespace {

using kernels::CpuIsa;

// Inputs exp and its callers must treat alike everywhere: both ends of its range and past them,
// infinities, NaN, signed zeros and subnormals, then ordinary values.
std::vector<float> edge_floats(std::mt19937& rng, size_t n) {
  std::vector<float> v = {0.0f, -0.0f, 1e-40f, -1e-40f, -87.5f, -103.9f, -104.5f, -150.0f, 88.7f, 89.0f, 89.5f,
                          200.0f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(), 0.5f, -0.5f};
  for (const float x : random_floats(rng, n, -110.0f, 110.0f)) v.push_back(x);
  const auto small = random_floats(rng, n, -4.0f, 4.0f);
  v.insert(v.end(), small.begin(), small.end());
  v.resize(n);
  return v;
}

class CpuCopies : public ::testing::TestWithParam<CpuIsa> {
 protected:
  // Runs `op` on fresh copies of the inputs on the scalar copy and on the one under test.
  template <class Op>
  void expect_same_bits(const std::string& what, bool q8, Op&& op) {
    SCOPED_TRACE(what);
    const auto scalar = kernels::make_cpu_backend(q8, CpuIsa::Scalar);
    const auto tested = kernels::make_cpu_backend(q8, GetParam());
    const std::vector<float> want = op(*scalar), got = op(*tested);
    EXPECT_EQ(first_bit_difference(got, want), "") << what << " on " << kernels::cpu_isa_name(GetParam());
  }
};

TEST_P(CpuCopies, MatmulAndGetRowsInEveryWeightFormat) {
  for (DType t : kAllTypes) {
    // 21: one tile of sixteen tokens on the AMX copy, and five more.
    for (const int64_t tokens : {1, 5, 21}) {
      for (const bool q8 : {false, true}) {
        const int64_t k = kernels::block_elems(t) == 1 ? 1000 : 1024, n_out = 37;  // 1000: a float row's tail
        const std::string what = std::string(kernels::dtype_name(t)) + (q8 ? " q8" : " f32") + " activations, " +
                                 std::to_string(tokens) + " tokens";
        expect_same_bits("matmul " + what, q8, [&](Backend& be) {
          std::mt19937 rng(11);
          const auto x = random_floats(rng, size_t(tokens * k), -2.0f, 2.0f);
          const auto w = weight_rows(rng, t, n_out, k);
          std::vector<float> y(size_t(tokens * n_out));
          be.matmul(x.data(), tokens, be.map_matrix(w.data(), t, n_out, k), t, n_out, k, y.data());
          return y;
        });
      }
    }
    expect_same_bits("get_rows " + std::string(kernels::dtype_name(t)), false, [&](Backend& be) {
      std::mt19937 rng(12);
      const int64_t k = 512;
      const auto w = weight_rows(rng, t, 9, k);
      const std::vector<int32_t> ids = {3, 0, 8, 3};
      std::vector<float> out(ids.size() * size_t(k));
      be.get_rows(w.data(), t, k, ids.data(), int64_t(ids.size()), out.data());
      return out;
    });
  }
}

TEST_P(CpuCopies, NormsActivationsAndElementwise) {
  for (const int64_t dim : {576, 100}) {
    expect_same_bits("rmsnorm and add_rmsnorm, dim " + std::to_string(dim), false, [&](Backend& be) {
      std::mt19937 rng(13);
      auto x = random_floats(rng, size_t(3 * dim), -3.0f, 3.0f);
      const auto w = random_floats(rng, size_t(dim), 0.5f, 1.5f), r = random_floats(rng, x.size());
      std::vector<float> y(x.size()), y2(x.size());
      be.rmsnorm(x.data(), w.data(), y.data(), 3, dim, 1e-5f);
      be.add_rmsnorm(x.data(), r.data(), w.data(), y2.data(), 3, dim, 1e-6f);
      y.insert(y.end(), y2.begin(), y2.end());
      y.insert(y.end(), x.begin(), x.end());
      return y;
    });
  }
  for (const bool gelu : {false, true}) {
    expect_same_bits(gelu ? "geglu" : "swiglu", false, [&](Backend& be) {
      std::mt19937 rng(14);
      const size_t n = 4133;  // not whole vectors
      auto gate = edge_floats(rng, n);
      if (gelu) gate = random_floats(rng, n, -6.0f, 6.0f);
      const auto up = random_floats(rng, n, -3.0f, 3.0f);
      std::vector<float> out(n);
      const auto op = gelu ? &Backend::geglu : &Backend::swiglu;
      (be.*op)(gate.data(), up.data(), out.data(), int64_t(n));
      return out;
    });
  }
  expect_same_bits("scale and add_bias", false, [&](Backend& be) {
    std::mt19937 rng(15);
    auto x = random_floats(rng, 5 * 77);
    const auto bias = random_floats(rng, 77);
    be.scale(x.data(), 0.3f, int64_t(x.size()));
    be.add_bias(x.data(), bias.data(), 5, 77);
    return x;
  });
}

// softmax is not a backend op (sample_rows and attention use it inside), so each copy's own.
TEST_P(CpuCopies, Softmax) {
  for (const int64_t n : {7, 1000, 49152}) {
    std::mt19937 rng(19);
    auto x = random_floats(rng, size_t(3 * n), -30.0f, 30.0f);
    x[1] = -INFINITY;
    x[size_t(n)] = 88.0f;
    auto want = x;
    kernels::cpu_ops(CpuIsa::Scalar).softmax(want.data(), 3, n);
    kernels::cpu_ops(GetParam()).softmax(x.data(), 3, n);
    EXPECT_EQ(first_bit_difference(x, want), "") << "softmax of " << n;
  }
}

TEST_P(CpuCopies, Rope) {
  for (const bool neox : {false, true}) {
    for (const int32_t rot : {64, 32}) {
      expect_same_bits(std::string(neox ? "neox" : "normal") + " rope, rot_dim " + std::to_string(rot), false,
                       [&](Backend& be) {
                         std::mt19937 rng(16);
                         const std::vector<int32_t> positions = {0, 1, 17, 4095, 8191, 131071, 3};
                         const int64_t heads = 3, hd = 64, nt = int64_t(positions.size());
                         auto q = random_floats(rng, size_t(nt * heads * hd), -2.0f, 2.0f);
                         be.rope(q.data(), positions.data(), nt, heads, hd,
                                 kernels::RopeParams{rot, 500000.0f, 0.5f, nullptr, neox});
                         return q;
                       });
    }
  }
}

TEST_P(CpuCopies, KvWriteAndAttention) {
  const std::vector<SeqSpec> prefill = {{37, 37}, {5, 2}, {70, 13}}, decode = {{1, 1}, {300, 1}, {33, 1}};
  for (const DType kv : {DType::F32, DType::F16, DType::Q8_0, DType::F8_E4M3}) {
    for (const int64_t hd : {64, 80, 128}) {
      if (kv == DType::Q8_0 && hd % 32 != 0) continue;  // whole q8_0 blocks per head
      for (const int32_t group : {1, 3}) {
        for (const int32_t window : {0, 24}) {
          const std::string what = std::string(kernels::dtype_name(kv)) + " cache, head_dim " + std::to_string(hd) +
                                   ", group " + std::to_string(group) + ", window " + std::to_string(window);
          for (const auto* specs : {&prefill, &decode}) {
            expect_same_bits("attention " + what, false, [&](Backend& be) {
              std::mt19937 rng(17);
              return run_attention(be, kv, hd, 2 * group, 2, *specs, rng, window).got;
            });
          }
        }
      }
    }
  }
}

TEST_P(CpuCopies, MixtureOfExpertsRouting) {
  expect_same_bits("moe_route and weighted_sum_rows", false, [&](Backend& be) {
    std::mt19937 rng(18);
    const int64_t tokens = 23, dim = 40;
    const int32_t experts = 8, top_k = 2;
    const auto logits = random_floats(rng, size_t(tokens * experts), -4.0f, 4.0f);
    std::vector<int32_t> ids(size_t(tokens * top_k)), offsets(size_t(experts + 1)), sorted(ids.size());
    std::vector<float> weights(ids.size());
    be.moe_route(logits.data(), tokens, experts, top_k, true, {ids.data(), weights.data(), offsets.data(), sorted.data()});
    const auto rows = random_floats(rng, size_t(tokens * top_k * dim));
    std::vector<float> out(size_t(tokens * dim));
    be.weighted_sum_rows(rows.data(), weights.data(), tokens, top_k, dim, out.data());
    out.insert(out.end(), weights.begin(), weights.end());
    return out;
  });
}

std::vector<CpuIsa> copies_beside_scalar() {
  std::vector<CpuIsa> v;
  for (const CpuIsa isa : kernels::supported_cpu_isas())
    if (isa != CpuIsa::Scalar) v.push_back(isa);
  return v;
}

std::string isa_test_name(const ::testing::TestParamInfo<CpuIsa>& info) {
  std::string n(kernels::cpu_isa_name(info.param));
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(AgainstScalar, CpuCopies, ::testing::ValuesIn(copies_beside_scalar()), isa_test_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CpuCopies);

}  // namespace
}  // namespace flashserve::test
