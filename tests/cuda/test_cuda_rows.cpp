// The row-wise CUDA ops (add_rmsnorm, rope, swiglu, get_rows, moe_route) against their CPU twins
// and the f64 references over the shapes that take the CUDA kernels' separate paths (alignment,
// shared-memory caching, tiles); tests/backend_ops checks the contract itself on every backend. The bound each op is held to is stated at its test. The plain TESTs at the
// end check the host wrappers' argument errors, which must come before any CUDA call: they run
// without a device.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/reference.h"

namespace flashserve {
namespace {

using kernels::DType;
using test::DeviceBuffer;
using CudaRows = test::CudaTest;

// x must be exactly x + residual (an IEEE add on both sides). y: the GPU reduces in a different
// fixed order and uses rsqrtf, so 1e-5 relative to the CPU twin and to the f64 norm. Runs both the
// float4 path (aligned, dim % 4 == 0) and the scalar one (offset rows or odd dim), with the summed
// row cached in shared memory (dim <= 8192) and re-read from global memory (dim 10000, 12290).
TEST_F(CudaRows, AddRmsNormMatchesCpuAndReference) {
  std::mt19937 rng(51);
  struct Case { int64_t rows, dim, offset; };
  for (const Case c : {Case{1, 64, 0}, {3, 576, 0}, {17, 1000, 0}, {64, 4096, 0}, {5, 577, 0}, {4, 576, 1},
                       {2, 10000, 0}, {3, 12290, 0}}) {
    const int64_t n = c.rows * c.dim;
    const auto x0 = test::random_floats(rng, size_t(n + c.offset), -3.0f, 3.0f);
    const auto res = test::random_floats(rng, x0.size(), -3.0f, 3.0f);
    const auto w = test::random_floats(rng, size_t(c.dim + c.offset), 0.5f, 1.5f);
    auto cpu_x = x0;
    std::vector<float> cpu_y(x0.size());
    kernels::add_rmsnorm(cpu_x.data() + c.offset, res.data() + c.offset, w.data() + c.offset,
                         cpu_y.data() + c.offset, c.rows, c.dim, 1e-5f);
    DeviceBuffer<float> dx(x0), dr(res), dw(w), dy(x0.size());
    kernels::cuda::add_rmsnorm(dx.get() + c.offset, dr.get() + c.offset, dw.get() + c.offset, dy.get() + c.offset,
                               c.rows, c.dim, 1e-5f, nullptr);
    const auto gpu_x = dx.to_host();
    const auto gpu_y = dy.to_host();
    const auto ref = test::ref_rmsnorm(cpu_x.data() + c.offset, w.data() + c.offset, c.rows, c.dim, 1e-5f);
    const std::string tag = "rows " + std::to_string(c.rows) + " dim " + std::to_string(c.dim) + " offset " +
                            std::to_string(c.offset);
    ASSERT_EQ(std::memcmp(gpu_x.data() + c.offset, cpu_x.data() + c.offset, size_t(n) * 4), 0) << tag;
    for (int64_t i = 0; i < n; ++i) {
      const float y = gpu_y[c.offset + i];
      ASSERT_NEAR(y, cpu_y[c.offset + i], 1e-5 * (1 + std::abs(cpu_y[c.offset + i]))) << tag << " at " << i;
      ASSERT_NEAR(y, ref[i], 1e-5 * (1 + std::abs(ref[i]))) << tag << " at " << i;
    }
  }
}

struct RopeCase {
  int64_t heads, head_dim;
  int32_t rot_dim;
  float base, freq_scale;
  bool factors;
};

// Angles in double on both sides, cos/sin rounded to float: the backends differ only by how the
// compilers fuse x0 c - x1 s, so 2e-6 (|x0| + |x1|) against the CPU and the f64 rotation, at
// positions up to 8191. Head counts 9 and 32 cover a partial and several full groups of 8 heads.
TEST_F(CudaRows, RopeMatchesCpuAndReference) {
  std::mt19937 rng(52);
  std::vector<int32_t> positions = {0, 1, 2, 255, 4095, 8190, 8191};
  std::uniform_int_distribution<int32_t> pos(0, 8191);
  for (int i = 0; i < 26; ++i) positions.push_back(pos(rng));
  const int64_t nt = int64_t(positions.size());
  const RopeCase cases[] = {{3, 64, 64, 10000.0f, 1.0f, false}, {9, 64, 32, 10000.0f, 1.0f, false},
                            {32, 128, 128, 500000.0f, 1.0f, true}, {2, 128, 96, 1000000.0f, 0.25f, true},
                            {4, 10, 6, 10000.0f, 0.5f, false}};
  DeviceBuffer<int32_t> dpos(positions);
  for (const RopeCase& c : cases) {
    const auto x0 = test::random_floats(rng, size_t(nt * c.heads * c.head_dim), -2.0f, 2.0f);
    const auto factors = test::random_floats(rng, size_t(c.rot_dim / 2), 1.0f, 8.0f);
    DeviceBuffer<float> dfactors(factors), dx(x0);
    auto cpu = x0;
    kernels::rope(cpu.data(), positions.data(), nt, c.heads, c.head_dim,
                  kernels::RopeParams{c.rot_dim, c.base, c.freq_scale, c.factors ? factors.data() : nullptr});
    kernels::cuda::rope(dx.get(), dpos.get(), nt, c.heads, c.head_dim,
                        kernels::RopeParams{c.rot_dim, c.base, c.freq_scale, c.factors ? dfactors.get() : nullptr},
                        nullptr);
    const auto gpu = dx.to_host();
    for (int64_t t = 0; t < nt; ++t) {
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t base = (t * c.heads + h) * c.head_dim;
        for (int64_t i = 0; i < c.rot_dim / 2; ++i) {
          double theta = c.freq_scale * std::pow(double(c.base), -2.0 * double(i) / c.rot_dim);
          if (c.factors) theta /= factors[i];
          const double a = positions[t] * theta;
          const double u = x0[base + 2 * i], v = x0[base + 2 * i + 1];
          const double tol = 2e-6 * (std::fabs(u) + std::fabs(v));
          const std::string tag = "heads " + std::to_string(c.heads) + " rot_dim " + std::to_string(c.rot_dim) +
                                  " pos " + std::to_string(positions[t]) + " pair " + std::to_string(i);
          ASSERT_NEAR(gpu[base + 2 * i], cpu[base + 2 * i], tol) << tag;
          ASSERT_NEAR(gpu[base + 2 * i + 1], cpu[base + 2 * i + 1], tol) << tag;
          ASSERT_NEAR(gpu[base + 2 * i], u * std::cos(a) - v * std::sin(a), tol) << tag;
          ASSERT_NEAR(gpu[base + 2 * i + 1], u * std::sin(a) + v * std::cos(a), tol) << tag;
        }
        for (int64_t d = c.rot_dim; d < c.head_dim; ++d) ASSERT_EQ(gpu[base + d], x0[base + d]) << "dim " << d;
      }
    }
  }
}

// expf and the CPU's vector exp are each within a few ulp, so silu * up within 2e-6 relative of
// the CPU and the f64 value, over gates in [-30, 30] plus the overflow edge (|gate| near 88, 100).
TEST_F(CudaRows, SwigluMatchesCpuAndReference) {
  std::mt19937 rng(53);
  for (int64_t n : {1, 7, 1000, 4096, 100003}) {
    auto gate = test::random_floats(rng, size_t(n), -30.0f, 30.0f);
    const auto up = test::random_floats(rng, size_t(n), -3.0f, 3.0f);
    if (n > 7) { gate[0] = -100.0f; gate[1] = 100.0f; gate[2] = 0.0f; gate[3] = -87.5f; gate[4] = 1e-3f; }
    std::vector<float> cpu(gate.size());
    kernels::swiglu(gate.data(), up.data(), cpu.data(), n);
    DeviceBuffer<float> dg(gate), du(up), dout(gate.size());
    kernels::cuda::swiglu(dg.get(), du.get(), dout.get(), n, nullptr);
    const auto gpu = dout.to_host();
    for (int64_t i = 0; i < n; ++i) {
      const double ref = test::ref_silu_mul(gate[i], up[i]);
      ASSERT_NEAR(gpu[i], cpu[i], 2e-6 * std::fabs(cpu[i]) + 1e-37) << "n " << n << " gate " << gate[i];
      ASSERT_NEAR(gpu[i], ref, 2e-6 * std::fabs(ref) + 1e-37) << "n " << n << " gate " << gate[i];
    }
  }
}

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                               DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                               DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS};

// Every dequantized value is one rounding of an exact expression (exact outright but for Q6_K and
// Q8_K), so bit for bit equal to the CPU gather and to the f64 decode rounded to f32. The table sits
// 2 bytes past an aligned address for all 16-bit and quantized types, as GGUF rows may (Q8_K's f32
// scale included); ids repeat and come in any order. k = 10240 gives the chunk decoders' threads
// more than one chunk each.
TEST_F(CudaRows, GetRowsMatchesCpuBitForBit) {
  std::mt19937 rng(54);
  for (DType t : kAllTypes) {
    const bool quantized = kernels::block_elems(t) > 1;
    for (int64_t k : {64, 576, 768, 1000, 4096, 10240}) {
      if (k % kernels::block_elems(t) != 0) continue;
      const int64_t n_rows = 37;
      const size_t rb = kernels::row_bytes(t, k);
      const size_t pad = t == DType::F32 ? 0 : 2;
      std::vector<uint8_t> table(pad + rb * size_t(n_rows));
      for (int64_t r = 0; r < n_rows; ++r) {
        const auto row = test::random_floats(rng, size_t(k), -2.0f + 0.1f * float(r % 5), 2.0f);
        kernels::quantize_row(t, row.data(), table.data() + pad + size_t(r) * rb, k);
      }
      DeviceBuffer<uint8_t> dtable(table);
      for (int64_t n : {1, 7, 33}) {
        std::vector<int32_t> ids(static_cast<size_t>(n));
        std::uniform_int_distribution<int32_t> pick(0, int32_t(n_rows - 1));
        for (int32_t& id : ids) id = pick(rng);
        ids.front() = int32_t(n_rows - 1);  // the last row: reads end exactly at the table's end
        std::vector<float> cpu(size_t(n * k));
        kernels::get_rows(table.data() + pad, t, k, ids.data(), n, cpu.data());
        DeviceBuffer<int32_t> dids(ids);
        DeviceBuffer<float> dout(cpu.size());
        kernels::cuda::get_rows(dtable.get() + pad, t, k, dids.get(), n, dout.get(), nullptr);
        const auto gpu = dout.to_host();
        const std::string tag = std::string(kernels::dtype_name(t)) + " k " + std::to_string(k) + " n " +
                                std::to_string(n) + (quantized ? " (quantized)" : "");
        ASSERT_EQ(std::memcmp(gpu.data(), cpu.data(), cpu.size() * 4), 0) << tag;
        for (int64_t i = 0; i < n; ++i) {
          const auto ref = test::ref_dequant(t, table.data() + pad + size_t(ids[i]) * rb, k);
          for (int64_t j = 0; j < k; ++j) ASSERT_EQ(gpu[i * k + j], float(ref[j])) << tag << " row " << i;
        }
      }
    }
  }
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  std::vector<int32_t> offsets, sorted;
};

Routed cpu_route(const std::vector<float>& logits, int64_t nt, int32_t ne, int32_t top_k, bool renormalize) {
  Routed r{std::vector<int32_t>(size_t(nt * top_k)), std::vector<float>(size_t(nt * top_k)),
           std::vector<int32_t>(size_t(ne) + 1), std::vector<int32_t>(size_t(nt * top_k))};
  kernels::moe_route(logits.data(), nt, ne, top_k, renormalize,
                     kernels::MoeRouting{r.ids.data(), r.weights.data(), r.offsets.data(), r.sorted.data()});
  return r;
}

// Runs the op twice on a workspace first filled with garbage: the second run must not depend on
// what the first left behind.
Routed gpu_route(const std::vector<float>& logits, int64_t nt, int32_t ne, int32_t top_k, bool renormalize) {
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<int32_t> ids(size_t(nt * top_k)), offsets(size_t(ne) + 1), sorted(size_t(nt * top_k));
  DeviceBuffer<float> weights(size_t(nt * top_k));
  DeviceBuffer<uint8_t> workspace(kernels::cuda::moe_route_workspace_bytes(nt, ne, top_k));
  FLASHSERVE_CUDA_CHECK(cudaMemset(workspace.get(), 0xff, workspace.size()));
  const kernels::MoeRouting out{ids.get(), weights.get(), offsets.get(), sorted.get()};
  for (int run = 0; run < 2; ++run)
    kernels::cuda::moe_route(dlogits.get(), nt, ne, top_k, renormalize, out, workspace.get(), nullptr);
  return {ids.to_host(), weights.to_host(), offsets.to_host(), sorted.to_host()};
}

// Logits on a coarse grid with the maximum repeated, so exact ties decide choices (both sides pick
// the lower id); the other half of the cases are continuous random logits.
std::vector<float> routing_logits(std::mt19937& rng, int64_t nt, int32_t ne, bool ties) {
  if (!ties) return test::random_floats(rng, size_t(nt * ne), -4.0f, 4.0f);
  std::uniform_int_distribution<int> grid(-12, 12);
  std::vector<float> x(size_t(nt * ne));
  for (float& v : x) v = 0.25f * float(grid(rng));
  for (int64_t t = 0; t < nt; t += 3)
    for (int32_t e = 0; e < ne; e += 5) x[t * ne + e] = 3.0f;
  return x;
}

// Choices are made on the raw logits by the same order on both sides, so ids, offsets and the
// grouped assignments are exactly equal; weights differ only by the softmax sum's order: 1e-6, and
// 1e-6 from the f64 softmax. Token counts straddle the 256-token tile (255, 256, 257) and reach the
// 32768-token benchmark size; 60 experts leave lanes without an expert.
TEST_F(CudaRows, MoeRouteMatchesCpuExactly) {
  std::mt19937 rng(55);
  struct Case { int64_t tokens; int32_t experts, top_k; };
  const Case cases[] = {{1, 8, 1},     {7, 8, 2},      {255, 64, 2},  {256, 64, 8},   {257, 64, 1},
                        {1001, 60, 2}, {1001, 256, 8}, {4099, 128, 4}, {32768, 64, 2}, {3, 1, 1}};
  for (const Case& c : cases) {
    for (bool ties : {false, true}) {
      for (bool renormalize : {false, true}) {
        const std::string tag = "tokens " + std::to_string(c.tokens) + " experts " + std::to_string(c.experts) +
                                " top_k " + std::to_string(c.top_k) + " ties " + std::to_string(ties) +
                                " renormalize " + std::to_string(renormalize);
        const auto logits = routing_logits(rng, c.tokens, c.experts, ties);
        const Routed cpu = cpu_route(logits, c.tokens, c.experts, c.top_k, renormalize);
        const Routed gpu = gpu_route(logits, c.tokens, c.experts, c.top_k, renormalize);
        ASSERT_EQ(gpu.ids, cpu.ids) << tag;
        ASSERT_EQ(gpu.offsets, cpu.offsets) << tag;
        ASSERT_EQ(gpu.sorted, cpu.sorted) << tag;
        for (int64_t t = 0; t < c.tokens; ++t) {
          const auto p = test::ref_softmax(logits.data() + t * c.experts, c.experts);
          double picked = 0;
          for (int32_t j = 0; j < c.top_k; ++j) picked += p[cpu.ids[t * c.top_k + j]];
          for (int32_t j = 0; j < c.top_k; ++j) {
            const size_t a = size_t(t * c.top_k + j);
            const double ref = renormalize ? p[cpu.ids[a]] / picked : p[cpu.ids[a]];
            ASSERT_NEAR(gpu.weights[a], cpu.weights[a], 1e-6) << tag << " assignment " << a;
            ASSERT_NEAR(gpu.weights[a], ref, 1e-6) << tag << " assignment " << a;
          }
        }
      }
    }
  }
}

TEST_F(CudaRows, MoeRouteWithoutTokensZeroesOffsets) {
  DeviceBuffer<int32_t> offsets(std::vector<int32_t>(17, -1));
  kernels::cuda::moe_route(nullptr, 0, 16, 2, true, kernels::MoeRouting{nullptr, nullptr, offsets.get(), nullptr},
                           nullptr, nullptr);
  EXPECT_EQ(offsets.to_host(), std::vector<int32_t>(17, 0));
}

// No device needed: every one of these must throw before its first CUDA call.
TEST(CudaRowsWithoutDevice, RejectBadShapes) {
  using namespace kernels;
  float f[8] = {};
  EXPECT_THROW(cuda::rmsnorm(nullptr, nullptr, nullptr, 0, 64, 1e-5f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::add_rmsnorm(f, f, f, f, 0, 64, 1e-5f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::add_rmsnorm(f, f, f, f, 2, 0, 1e-5f, nullptr), std::invalid_argument);

  EXPECT_THROW(cuda::rope(f, nullptr, 1, 1, 64, RopeParams{63}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::rope(f, nullptr, 1, 1, 64, RopeParams{66}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::rope(f, nullptr, 1, 1, 64, RopeParams{-2}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::rope(f, nullptr, -1, 1, 64, RopeParams{64}, nullptr), std::invalid_argument);

  EXPECT_THROW(cuda::swiglu(f, f, f, -1, nullptr), std::invalid_argument);

  const int32_t id = 0;
  alignas(4) uint8_t table[64] = {};
  EXPECT_THROW(cuda::get_rows(table, DType::Q4_0, 48, &id, 1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table, DType::F16, 0, &id, 1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table, DType::F16, 8, &id, -1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table + 1, DType::Q8_0, 32, &id, 1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table + 2, DType::F32, 8, &id, 1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table, DType::Q4_K, 32, &id, 1, f, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::get_rows(table, DType(16), 32, &id, 1, f, nullptr), std::invalid_argument);  // IQ2_XXS

  int32_t i32[8] = {};
  const MoeRouting out{i32, f, i32, i32};
  EXPECT_THROW(cuda::moe_route(f, 1, 0, 1, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, 1, kMoeMaxExperts + 1, 1, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, 1, 8, 0, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, 1, 4, 5, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, 1, 64, kMoeMaxTopK + 1, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, -1, 8, 2, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, int64_t(1) << 31, 8, 2, false, out, table, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route(f, 1, 8, 2, false, out, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route_workspace_bytes(1, 8, 9), std::invalid_argument);
  EXPECT_THROW(cuda::moe_route_workspace_bytes(-1, 8, 2), std::invalid_argument);
}

// Empty inputs are no-ops that return before touching the device.
TEST(CudaRowsWithoutDevice, EmptyInputsLaunchNothing) {
  using namespace kernels;
  EXPECT_NO_THROW(cuda::swiglu(nullptr, nullptr, nullptr, 0, nullptr));
  EXPECT_NO_THROW(cuda::rope(nullptr, nullptr, 0, 4, 64, RopeParams{64}, nullptr));
  EXPECT_NO_THROW(cuda::rope(nullptr, nullptr, 3, 4, 64, RopeParams{0}, nullptr));
  EXPECT_NO_THROW(cuda::get_rows(nullptr, DType::Q4_1, 64, nullptr, 0, nullptr, nullptr));
  EXPECT_EQ(cuda::moe_route_workspace_bytes(0, 64, 2), 0u);
  EXPECT_EQ(cuda::moe_route_workspace_bytes(257, 64, 2), 2u * 64 * sizeof(int32_t));
}

}  // namespace
}  // namespace flashserve
