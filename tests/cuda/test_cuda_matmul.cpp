// CUDA matmul against its CPU twin and the f64 reference, on both paths: the GEMV (up to
// kGemvMaxTokens tokens) and cuBLASLt (more).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/matmul.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/reference.h"

namespace flashserve {
namespace {

using kernels::DType;
using test::DeviceBuffer;
using CudaMatmul = test::CudaTest;

constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                               DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K,
                               DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS};

bool quantized(DType t) { return kernels::block_elems(t) > 1; }

// n_out rows of k elements; each row its own range and offset, so quant scales differ per row.
std::vector<uint8_t> random_weights(std::mt19937& rng, DType t, int64_t n_out, int64_t k) {
  const size_t rb = kernels::row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(n_out));
  std::uniform_real_distribution<float> half_width(0.05f, 2.0f), centre(-0.5f, 0.5f);
  for (int64_t o = 0; o < n_out; ++o) {
    const float h = half_width(rng), c = centre(rng);
    const auto row = test::random_floats(rng, size_t(k), c - h, c + h);
    kernels::quantize_row(t, row.data(), w.data() + o * rb, k);
  }
  return w;
}

// Error bound per output, as a multiple of sum_k |x_k w_k| (the reference's abs_sum):
//  - GEMV and cuBLASLt's f32 path accumulate f32 products of exact operands (Q6_K and Q8_K weights
//    carry one f32 rounding, 6e-8 relative): 1e-5, as the CPU tests.
//  - The 16-bit path rounds x to the weights' 16-bit type (relative error 2^-11 for F16, 2^-8 for
//    BF16) and, for quantized weights, each expanded weight to F16 (another 2^-11): per term
//    |x~w~ - xw| <= (u_x + u_w) |xw|, so 2 * 2^-11 ~ 1e-3 (F16) and 2^-8 ~ 3.9e-3 (BF16), plus f32
//    accumulation and F16 subnormals for x near zero -- hence 1.5e-3 and 5e-3.
double relative_bound(DType t, int64_t num_tokens) {
  if (num_tokens <= kernels::cuda::kGemvMaxTokens || t == DType::F32) return 1e-5;
  return t == DType::BF16 ? 5e-3 : 1.5e-3;
}

struct Shape {
  int64_t k, n_out;
};

// k spanning one and several passes of a warp's lanes (1,024 columns of quantized rows, 256 of float
// rows), and a partial pass, in whole blocks of the type.
std::vector<Shape> shapes(DType t) {
  if (kernels::block_elems(t) == kernels::kSuperBlock) return {{512, 67}, {1536, 33}, {2304, 5}};
  return {{576, 67}, {1536, 33}, {2080, 5}};
}

std::vector<float> run_gpu(kernels::cuda::MatmulContext& ctx, const std::vector<float>& x, int64_t nt, int64_t k,
                           const std::vector<uint8_t>& w, DType t, int64_t n_out) {
  DeviceBuffer<float> dx(x), dy(size_t(nt * n_out));
  DeviceBuffer<uint8_t> dw(w);
  kernels::cuda::matmul(ctx, dx.get(), nt, k, dw.get(), t, n_out, dy.get(), nullptr);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  return dy.to_host();
}

void expect_matches(kernels::cuda::MatmulContext& ctx, std::mt19937& rng, DType t, int64_t nt, const Shape& s) {
  const auto w = random_weights(rng, t, s.n_out, s.k);
  const auto x = test::random_floats(rng, size_t(nt * s.k), -2.0f, 2.0f);
  const auto gpu = run_gpu(ctx, x, nt, s.k, w, t, s.n_out);
  std::vector<float> cpu(gpu.size());
  kernels::matmul(x.data(), nt, s.k, w.data(), t, s.n_out, cpu.data());
  const auto ref = test::ref_matmul(x.data(), nt, s.k, w.data(), t, s.n_out);
  const double bound = relative_bound(t, nt);
  for (size_t i = 0; i < gpu.size(); ++i) {
    const std::string where = std::string(kernels::dtype_name(t)) + " nt=" + std::to_string(nt) +
                              " k=" + std::to_string(s.k) + " n_out=" + std::to_string(s.n_out) + " at " +
                              std::to_string(i);
    ASSERT_LE(std::fabs(gpu[i] - ref.y[i]), bound * ref.abs_sum[i] + 1e-30) << where << ": gpu " << gpu[i]
                                                                             << " ref " << ref.y[i];
    // The CPU twin is itself within 1e-5 of the reference.
    ASSERT_LE(std::fabs(double(gpu[i]) - cpu[i]), (bound + 1e-5) * ref.abs_sum[i] + 1e-30) << where;
  }
}

// GEMV token counts (1, 3, 8: token tiles 1, 4 and 8) and cuBLASLt ones; odd n_out (a partly
// filled last block of rows); k over one and several passes of the lanes, and a partial pass; float
// rows with k not a multiple of 8 (the GEMV's one-column-at-a-time path).
TEST_F(CudaMatmul, MatchesCpuAndReferenceOnBothPaths) {
  std::mt19937 rng(31);
  kernels::cuda::MatmulContext ctx;
  for (DType t : kAllTypes) {
    for (int64_t nt : {1, 3, 8, 9, 64, 300}) {
      for (const Shape& s : shapes(t)) expect_matches(ctx, rng, t, nt, s);
      if (!quantized(t)) expect_matches(ctx, rng, t, nt, Shape{100, 7});  // k not whole 32-blocks
    }
  }
}

// Within the GEMV a token's outputs are bit-identical however many tokens share the call.
TEST_F(CudaMatmul, GemvIsBatchInvariant) {
  std::mt19937 rng(32);
  kernels::cuda::MatmulContext ctx;
  const int64_t k = 1536, n_out = 41, nt = kernels::cuda::kGemvMaxTokens;
  for (DType t : kAllTypes) {
    const auto w = random_weights(rng, t, n_out, k);
    const auto x = test::random_floats(rng, size_t(nt * k), -2.0f, 2.0f);
    const auto all = run_gpu(ctx, x, nt, k, w, t, n_out);
    const auto three = run_gpu(ctx, std::vector<float>(x.begin(), x.begin() + 3 * k), 3, k, w, t, n_out);
    for (int64_t tok : {int64_t(0), int64_t(2), nt - 1}) {
      const auto alone = run_gpu(ctx, std::vector<float>(x.begin() + tok * k, x.begin() + (tok + 1) * k), 1, k, w, t,
                                 n_out);
      EXPECT_EQ(std::memcmp(alone.data(), &all[tok * n_out], size_t(n_out) * 4), 0)
          << kernels::dtype_name(t) << " token " << tok << " of " << nt;
      if (tok < 3) {
        EXPECT_EQ(std::memcmp(alone.data(), &three[tok * n_out], size_t(n_out) * 4), 0)
            << kernels::dtype_name(t) << " token " << tok << " of 3";
      }
    }
  }
}

// Operands at odd offsets: rows of F16 weights 2-byte aligned, x and y 4-byte aligned. cuBLASLt must
// be told (its heuristics assume 256-byte alignment by default).
TEST_F(CudaMatmul, UnalignedOperands) {
  std::mt19937 rng(33);
  kernels::cuda::MatmulContext ctx;
  const int64_t k = 96, n_out = 13, nt = 20;
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0}) {
    const auto w = random_weights(rng, t, n_out, k);
    const auto x = test::random_floats(rng, size_t(nt * k), -2.0f, 2.0f);
    const size_t w_shift = quantized(t) ? 2 : kernels::row_bytes(t, 1);  // one element (or a Q8_0 block's 2-byte step)
    std::vector<uint8_t> w_shifted(w_shift, 0);
    w_shifted.insert(w_shifted.end(), w.begin(), w.end());
    std::vector<float> x_shifted{0.0f};
    x_shifted.insert(x_shifted.end(), x.begin(), x.end());
    DeviceBuffer<float> dx(x_shifted), dy(size_t(nt * n_out) + 1);
    DeviceBuffer<uint8_t> dw(w_shifted);
    for (int64_t tokens : {int64_t(2), nt}) {
      kernels::cuda::matmul(ctx, dx.get() + 1, tokens, k, dw.get() + w_shift, t, n_out, dy.get() + 1, nullptr);
      const auto y = dy.to_host();
      const auto ref = test::ref_matmul(x.data(), tokens, k, w.data(), t, n_out);
      for (int64_t i = 0; i < tokens * n_out; ++i) {
        ASSERT_LE(std::fabs(y[i + 1] - ref.y[i]), relative_bound(t, tokens) * ref.abs_sum[i] + 1e-30)
            << kernels::dtype_name(t) << " tokens " << tokens << " at " << i;
      }
    }
  }
}

// After reserve(), products within the reserved sizes run during a graph capture (no allocation).
TEST_F(CudaMatmul, ReservedContextRunsInsideGraphCapture) {
  std::mt19937 rng(34);
  kernels::cuda::MatmulContext ctx;
  const int64_t k = 576, n_out = 67, nt = 64;
  ctx.reserve(nt, k, n_out);
  for (DType t : {DType::Q4_1, DType::BF16}) {
    const auto w = random_weights(rng, t, n_out, k);
    const auto x = test::random_floats(rng, size_t(nt * k), -2.0f, 2.0f);
    DeviceBuffer<float> dx(x), dy(size_t(nt * n_out));
    DeviceBuffer<uint8_t> dw(w);
    cudaStream_t stream = nullptr;
    FLASHSERVE_CUDA_CHECK(cudaStreamCreate(&stream));
    // A first call outside the capture builds the cuBLASLt plan for this shape.
    kernels::cuda::matmul(ctx, dx.get(), nt, k, dw.get(), t, n_out, dy.get(), stream);
    FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
    FLASHSERVE_CUDA_CHECK(cudaMemset(dy.get(), 0, size_t(nt * n_out) * 4));
    cudaGraph_t graph = nullptr;
    FLASHSERVE_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    kernels::cuda::matmul(ctx, dx.get(), nt, k, dw.get(), t, n_out, dy.get(), stream);
    FLASHSERVE_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec = nullptr;
    FLASHSERVE_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    FLASHSERVE_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto y = dy.to_host();
    const auto ref = test::ref_matmul(x.data(), nt, k, w.data(), t, n_out);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_LE(std::fabs(y[i] - ref.y[i]), relative_bound(t, nt) * ref.abs_sum[i] + 1e-30) << i;
    FLASHSERVE_CUDA_CHECK(cudaGraphExecDestroy(exec));
    FLASHSERVE_CUDA_CHECK(cudaGraphDestroy(graph));
    FLASHSERVE_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// Argument errors throw before any CUDA call, so these run without a device.
TEST(CudaMatmulWithoutDevice, RejectsBadArguments) {
  kernels::cuda::MatmulContext ctx;
  float x = 0.0f, y = 0.0f;
  uint8_t w[64] = {};
  auto call = [&](int64_t nt, int64_t k, DType t, int64_t n_out) {
    kernels::cuda::matmul(ctx, &x, nt, k, w, t, n_out, &y, nullptr);
  };
  EXPECT_THROW(call(1, 33, DType::Q4_0, 1), std::invalid_argument);  // k not whole quant blocks
  EXPECT_THROW(call(1, 288, DType::Q4_K, 1), std::invalid_argument);  // nor whole super-blocks
  EXPECT_THROW(call(1, 0, DType::F32, 1), std::invalid_argument);
  EXPECT_THROW(call(-1, 32, DType::F32, 1), std::invalid_argument);
  EXPECT_THROW(call(1, 32, DType::F32, -1), std::invalid_argument);
  EXPECT_THROW(call(1, 32, static_cast<DType>(16), 1), std::invalid_argument);  // IQ2_XXS: not taken
  EXPECT_THROW(kernels::cuda::matmul(ctx, nullptr, 1, 32, w, DType::F32, 1, &y, nullptr), std::invalid_argument);
  EXPECT_THROW(ctx.reserve(-1, 32, 32), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
