// Every op of the backend contract (kernels/backend.h) on every backend this machine has -- the CPU
// always, CUDA when a device is visible -- on random inputs, against a plain f64 reference by
// normalised mean squared error, and where the contract promises exact results (decoding, routing,
// token choice) against the CPU bit for bit: llama.cpp's test-backend-ops, for our contract. A case
// the backend reports unsupported is skipped and counted, never passed silently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "tests/backend_ops/backend_cases.h"
#include "tests/kernels/reference.h"
#include "tests/kernels/reference_sampling.h"

namespace flashserve::test {
namespace {

using kernels::Backend;
using kernels::Buffer;
using kernels::Op;

// The CPU once per compiled copy of its ops this machine can run (kernels/cpu_isa.h).
std::vector<std::unique_ptr<Backend>> all_backends() {
  std::vector<std::unique_ptr<Backend>> b;
  for (kernels::CpuIsa isa : kernels::supported_cpu_isas()) b.push_back(kernels::make_cpu_backend(false, isa));
  if (kernels::cuda_device_count() > 0) b.push_back(kernels::make_cuda_backend());
  return b;
}

// Cases run and skipped per op, printed after the last test so a run shows what it covered.
std::map<std::string, std::pair<int, int>>& tally() {
  static std::map<std::string, std::pair<int, int>> t;
  return t;
}
class PrintTally : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [what, n] : tally()) std::printf("[ coverage ] %-38s %3d run, %3d unsupported\n", what.c_str(), n.first, n.second);
  }
};
const auto* const print_tally = ::testing::AddGlobalTestEnvironment(new PrintTally);

bool runs(const Backend& be, Op op, DType type, const kernels::OpShape& shape = {}) {
  const bool ok = be.supports(op, type, shape);
  auto& n = tally()[be.name().substr(0, be.name().find(',')) + " " + kernels::op_name(op)];
  (ok ? n.first : n.second)++;
  return ok;
}

double nmse(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return norm > 0 ? err / norm : err;
}

kernels::StepLimits limits() {
  kernels::StepLimits l;
  l.max_tokens = 64;
  l.max_k = 4096;
  l.max_n_out = 4096;
  l.num_heads = 8;
  l.head_dim = 128;
  l.max_context_len = 2048;
  l.experts = 16;
  l.top_k = 4;
  return l;
}

TEST(BackendOps, GetRowsDecodesExactly) {
  std::mt19937 rng(1);
  const int64_t rows = 9, cols = 512;
  const std::vector<int32_t> ids = {3, 0, 8, 3, 5};
  for (auto& be : all_backends()) {
    for (DType t : kAllTypes) {
      if (!runs(*be, Op::GetRows, t)) continue;
      SCOPED_TRACE(be->name() + " " + std::string(kernels::dtype_name(t)));
      const auto w = weight_rows(rng, t, rows, cols);
      On<uint8_t> dw(*be, w);
      On<int32_t> did(*be, ids);
      On<float> out(*be, ids.size() * cols);
      be->get_rows(dw.get(), t, cols, did.get(), int64_t(ids.size()), out.get());
      const auto got = out.host();
      for (size_t i = 0; i < ids.size(); ++i) {
        const auto want = ref_dequant(t, w.data() + ids[i] * kernels::row_bytes(t, cols), cols);
        // Each element is one rounding of an exact expression: the f64 value rounded to f32.
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(got[i * cols + c], float(want[c])) << "row " << i << " col " << c;
      }
    }
  }
}

// Token counts on both sides of the CUDA backend's GEMV / GEMM switch (kGemvMaxTokens = 8); odd row
// counts (a partly filled last tile); rows of one and of several super-blocks.
TEST(BackendOps, MatmulEveryWeightType) {
  std::mt19937 rng(2);
  struct Shape { int64_t k, n_out; };
  for (auto& be : all_backends()) {
    be->reserve(limits());
    for (DType t : kAllTypes) {
      if (!runs(*be, Op::Matmul, t)) continue;
      for (const Shape& s : {Shape{512, 96}, Shape{1536, 33}, Shape{2304, 5}}) {
        const auto w = weight_rows(rng, t, s.n_out, s.k);
        On<uint8_t> dw(*be, w);
        for (int64_t tokens : {1, 3, 8, 9, 64}) {
          SCOPED_TRACE(be->name() + " " + std::string(kernels::dtype_name(t)) + " k " + std::to_string(s.k) + " tokens " +
                       std::to_string(tokens));
          const auto x = random_floats(rng, size_t(tokens * s.k));
          On<float> dx(*be, x), y(*be, size_t(tokens * s.n_out));
          be->matmul(dx.get(), tokens, dw.get(), t, s.n_out, s.k, y.get());
          const auto want = ref_matmul(x.data(), tokens, s.k, w.data(), t, s.n_out);
          // f16 activations on a GPU's large-batch path allow ~1e-6; a real bug is orders above.
          EXPECT_LT(nmse(y.host(), want.y), 5e-6);
        }
      }
    }
  }
}

TEST(BackendOps, NormsRopeAndSwiglu) {
  std::mt19937 rng(3);
  const int64_t rows = 5, dim = 576;
  for (auto& be : all_backends()) {
    SCOPED_TRACE(be->name());
    const auto x = random_floats(rng, size_t(rows * dim), -3.0f, 3.0f), w = random_floats(rng, size_t(dim), 0.5f, 1.5f);
    const auto r = random_floats(rng, size_t(rows * dim));
    if (runs(*be, Op::RmsNorm, DType::F32)) {
      On<float> dx(*be, x), dw(*be, w), dr(*be, r), y(*be, x.size());
      be->rmsnorm(dx.get(), dw.get(), y.get(), rows, dim, 1e-5f);
      EXPECT_LT(nmse(y.host(), ref_rmsnorm(x.data(), w.data(), rows, dim, 1e-5f)), 1e-12) << "rmsnorm";
    }
    if (runs(*be, Op::AddRmsNorm, DType::F32)) {
      On<float> dx(*be, x), dw(*be, w), dr(*be, r), y(*be, x.size());
      be->add_rmsnorm(dx.get(), dr.get(), dw.get(), y.get(), rows, dim, 1e-5f);
      std::vector<float> summed(x.size());
      for (size_t i = 0; i < x.size(); ++i) summed[i] = x[i] + r[i];
      EXPECT_EQ(dx.host(), summed) << "add_rmsnorm's residual stream";
      EXPECT_LT(nmse(y.host(), ref_rmsnorm(summed.data(), w.data(), rows, dim, 1e-5f)), 1e-12) << "add_rmsnorm";
    }
    if (runs(*be, Op::SwiGLU, DType::F32)) {
      const auto up = random_floats(rng, x.size(), -3.0f, 3.0f);
      On<float> dg(*be, x), du(*be, up), out(*be, x.size());
      be->swiglu(dg.get(), du.get(), out.get(), int64_t(x.size()));
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = ref_silu_mul(x[i], up[i]);
      EXPECT_LT(nmse(out.host(), want), 1e-12) << "swiglu";
    }
    if (runs(*be, Op::GeGLU, DType::F32)) {
      const auto up = random_floats(rng, x.size(), -3.0f, 3.0f);
      On<float> dg(*be, x), du(*be, up), out(*be, x.size());
      be->geglu(dg.get(), du.get(), out.get(), int64_t(x.size()));
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const double g = x[i];
        want[i] = 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))) * up[i];
      }
      EXPECT_LT(nmse(out.host(), want), 1e-12) << "geglu";
    }
    if (runs(*be, Op::Scale, DType::F32)) {
      On<float> dx(*be, x);
      be->scale(dx.get(), 8.0f, int64_t(x.size()));
      std::vector<double> want(x.begin(), x.end());
      for (double& v : want) v *= 8.0;
      EXPECT_LT(nmse(dx.host(), want), 1e-14) << "scale";
    }
    if (runs(*be, Op::AddBias, DType::F32)) {
      On<float> dx(*be, x), db(*be, w);
      be->add_bias(dx.get(), db.get(), rows, dim);
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = double(x[i]) + w[i % size_t(dim)];
      EXPECT_LT(nmse(dx.host(), want), 1e-14) << "add_bias";
    }
    for (bool neox : {false, true}) {
      if (!runs(*be, Op::Rope, DType::F32)) continue;
      const std::vector<int32_t> positions = {0, 1, 17, 4095, 8191, 3};
      const int64_t heads = 3, hd = 64, rot = 32, nt = int64_t(positions.size());
      const auto q = random_floats(rng, size_t(nt * heads * hd), -2.0f, 2.0f);
      const auto factors = random_floats(rng, size_t(rot / 2), 1.0f, 8.0f);
      On<float> dq(*be, q), df(*be, factors);
      On<int32_t> dp(*be, positions);
      be->rope(dq.get(), dp.get(), nt, heads, hd, kernels::RopeParams{int32_t(rot), 500000.0f, 0.5f, df.get(), neox});
      std::vector<double> want(q.begin(), q.end());
      for (int64_t t = 0; t < nt; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t base = (t * heads + h) * hd;
          for (int64_t i = 0; i < rot / 2; ++i) {
            const double a = positions[t] * 0.5 * std::pow(500000.0, -2.0 * double(i) / rot) / factors[i];
            const int64_t first = base + (neox ? i : 2 * i), second = first + (neox ? rot / 2 : 1);
            const double u = q[first], v = q[second];
            want[first] = u * std::cos(a) - v * std::sin(a);
            want[second] = u * std::sin(a) + v * std::cos(a);
          }
        }
      }
      EXPECT_LT(nmse(dq.host(), want), 1e-10) << (neox ? "rope (neox)" : "rope");
    }
  }
}

// run_attention against its f64 reference.
void check_attention(Backend& be, DType kv_type, int64_t hd, int32_t heads, int32_t kv_heads,
                     const std::vector<SeqSpec>& specs, std::mt19937& rng, int32_t window = 0,
                     bool resident_rows = false) {
  const AttentionRun r = run_attention(be, kv_type, hd, heads, kv_heads, specs, rng, window, resident_rows);
  // The contract lets a GPU's prefill run on tensor cores, which round the queries and the softmax
  // weights to the cache type (docs/cuda.md): NMSE near u^2 with u = 2^-11 (F16) or 2^-8 (BF16); the
  // host emulator measured 3e-8 and 2e-6. Everything else is f32 arithmetic.
  const bool tensor_cores = !be.is_host() && std::any_of(specs.begin(), specs.end(), [](const SeqSpec& s) {
    return s.num_queries > 1;
  });
  // An fp8 cache's tiles are f16 (kernels/cuda/attention_tile.cuh), so its tensor cores round as f16's.
  const bool f16_tiles = kv_type == DType::F16 || kv_type == DType::F8_E4M3;
  EXPECT_LT(nmse(r.got, r.want), tensor_cores ? (f16_tiles ? 3e-7 : 2e-5) : 1e-10);
  // Against the K/V values as computed: what storing them costs. A q8_0 block rounds to steps of
  // max|x| / 127, an error variance of step^2 / 12: NMSE ~1.5e-5 for these uniform values (measured
  // 1.2e-5 to 2.0e-5 over the cases here); f16's relative rounding, ~1e-7. E4M3 keeps 3 mantissa
  // bits, a relative step of 2^-4 to 2^-3: measured 4.7e-4 to 7.8e-4, about 30 times q8_0's.
  const double store_bound = kv_type == DType::Q8_0 ? 5e-5 : kv_type == DType::F16 ? 1e-6 : kv_type == DType::F8_E4M3 ? 1.5e-3 : 0;
  if (store_bound > 0) {
    EXPECT_LT(nmse(r.got, r.exact), store_bound);
  }
}

TEST(BackendOps, KvWriteAndAttention) {
  std::mt19937 rng(4);
  const std::vector<SeqSpec> prefill = {{37, 37}, {5, 2}, {70, 13}, {16, 1}};
  const std::vector<SeqSpec> decode = {{1, 1}, {100, 1}, {1300, 1}, {33, 1}};  // past a 512-position partition
  for (auto& be : all_backends()) {
    be->reserve(limits());
    for (DType kv_type : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::F8_E4M3}) {
      for (int64_t hd : {64, 128, 256}) {
        for (int32_t group : {1, 4}) {
          const kernels::OpShape shape{.head_dim = hd, .group = group};
          if (!runs(*be, Op::KvWrite, kv_type, shape) || !runs(*be, Op::Attention, kv_type, shape)) continue;
          SCOPED_TRACE(be->name() + " kv " + std::string(kernels::dtype_name(kv_type)) + " head_dim " +
                       std::to_string(hd) + " group " + std::to_string(group));
          check_attention(*be, kv_type, hd, 2 * group, 2, prefill, rng);
          check_attention(*be, kv_type, hd, 2 * group, 2, decode, rng);
          check_attention(*be, kv_type, hd, 2 * group, 2, prefill, rng, 0, true);  // rows kept across steps
          check_attention(*be, kv_type, hd, 2 * group, 2, decode, rng, 0, true);
          const kernels::OpShape windowed{.head_dim = hd, .group = group, .window = 24};
          if (!runs(*be, Op::Attention, kv_type, windowed)) continue;
          check_attention(*be, kv_type, hd, 2 * group, 2, prefill, rng, 24);  // Gemma 3's local layers
          check_attention(*be, kv_type, hd, 2 * group, 2, decode, rng, 24);
        }
      }
    }
  }
}

TEST(BackendOps, MixtureOfExpertsRoutingScatterAndSum) {
  std::mt19937 rng(5);
  const int64_t tokens = 23, dim = 40;
  const int32_t experts = 8, top_k = 2;
  const auto logits = random_floats(rng, size_t(tokens * experts), -4.0f, 4.0f);
  std::vector<int32_t> cpu_ids, cpu_offsets, cpu_sorted;
  for (auto& be : all_backends()) {
    if (!runs(*be, Op::MoeRoute, DType::F32, {.experts = experts, .top_k = top_k})) continue;
    SCOPED_TRACE(be->name());
    be->reserve(limits());
    On<float> dl(*be, logits), weights(*be, size_t(tokens * top_k));
    On<int32_t> ids(*be, size_t(tokens * top_k)), offsets(*be, size_t(experts + 1)), sorted(*be, size_t(tokens * top_k));
    be->moe_route(dl.get(), tokens, experts, top_k, true, {ids.get(), weights.get(), offsets.get(), sorted.get()});
    const auto got_ids = ids.host(), got_offsets = offsets.host(), got_sorted = sorted.host();
    const auto got_weights = weights.host();
    if (cpu_ids.empty()) {
      cpu_ids = got_ids, cpu_offsets = got_offsets, cpu_sorted = got_sorted;
    } else {
      EXPECT_EQ(got_ids, cpu_ids);
      EXPECT_EQ(got_offsets, cpu_offsets);
      EXPECT_EQ(got_sorted, cpu_sorted);
    }
    std::vector<double> want_weights;
    for (int64_t t = 0; t < tokens; ++t) {
      const auto p = ref_softmax(logits.data() + t * experts, experts);
      double picked = 0;
      for (int32_t j = 0; j < top_k; ++j) picked += p[got_ids[t * top_k + j]];
      for (int32_t j = 0; j < top_k; ++j) want_weights.push_back(p[got_ids[t * top_k + j]] / picked);
    }
    EXPECT_LT(nmse(got_weights, want_weights), 1e-12) << "routing weights";

    // Every assignment's row scattered to its slot, then each token's rows summed by weight.
    if (!runs(*be, Op::ScatterRows, DType::F32) || !runs(*be, Op::WeightedSumRows, DType::F32)) continue;
    const auto rows = random_floats(rng, size_t(tokens * top_k * dim));
    On<float> drows(*be, rows), slots(*be, rows.size()), out(*be, size_t(tokens * dim));
    be->scatter_rows(drows.get(), tokens * top_k, dim, sorted.get(), slots.get());
    be->weighted_sum_rows(slots.get(), weights.get(), tokens, top_k, dim, out.get());
    std::vector<double> placed(rows.size()), want(size_t(tokens * dim), 0.0);
    for (int64_t i = 0; i < tokens * top_k; ++i)
      for (int64_t c = 0; c < dim; ++c) placed[got_sorted[i] * dim + c] = rows[i * dim + c];
    for (int64_t t = 0; t < tokens; ++t)
      for (int32_t j = 0; j < top_k; ++j)
        for (int64_t c = 0; c < dim; ++c) want[t * dim + c] += double(got_weights[t * top_k + j]) * placed[(t * top_k + j) * dim + c];
    EXPECT_LT(nmse(out.host(), want), 1e-12) << "scatter and weighted sum";
  }
}

// Token choice is exact: every backend picks the plain reference's token from the same row,
// parameters and uniform.
TEST(BackendOps, SampleRowsPicksTheReferenceToken) {
  std::mt19937 rng(6);
  // One vocabulary smaller than a GPU block, one too large for its shared-memory row cache.
  for (int32_t vocab : {1, 100, 4099, 152064}) {
    const int32_t rows = 24;
    std::vector<kernels::SamplingRow> params(rows);
    std::vector<kernels::TokenAdjust> adjusts;
    std::vector<uint32_t> masks;
    for (int32_t r = 0; r < rows; ++r) {
      kernels::SamplingRow& p = params[r];
      p.temperature = r % 4 == 0 ? 0.0f : 0.3f + 0.1f * float(r % 9);
      p.top_k = r % 3 == 0 ? 40 : 0;
      p.top_p = r % 5 == 0 ? 0.9f : 1.0f;
      p.min_p = r % 7 == 0 ? 0.05f : 0.0f;
      p.repetition_penalty = r % 2 ? 1.2f : 1.0f;
      p.frequency_penalty = r % 3 == 1 ? 0.5f : 0.0f;
      p.presence_penalty = r % 8 == 3 ? -0.4f : 0.0f;
      p.uniform = std::uniform_real_distribution<double>(0, 1)(rng);
      p.adjust_begin = int32_t(adjusts.size());
      std::set<int32_t> touched;  // one adjust per token
      while (int32_t(touched.size()) < std::min(vocab, r % 6)) touched.insert(int32_t(rng() % uint32_t(vocab)));
      for (int32_t id : touched) adjusts.push_back({id, id % 3, 1, id % 2 ? 1.5f : 0.0f});
      p.adjust_end = int32_t(adjusts.size());
      if (r % 5 == 2) {  // constrained decoding: a few allowed tokens, one of them the last
        p.mask_row = int32_t(masks.size()) / kernels::mask_words(vocab);
        std::vector<uint32_t> mask(size_t(kernels::mask_words(vocab)), 0);
        for (int32_t id = vocab - 1; id >= 0; id -= 1 + int32_t(rng() % 997)) mask[size_t(id / 32)] |= uint32_t(1) << (id % 32);
        masks.insert(masks.end(), mask.begin(), mask.end());
      }
    }
    const auto logits = random_floats(rng, size_t(vocab) * rows, -6.0f, 6.0f);
    std::vector<int32_t> want(rows);
    auto scratch = logits;
    reference::sample_rows(scratch.data(), rows, vocab, params.data(), adjusts.data(), masks.data(), want.data());
    for (auto& be : all_backends()) {
      if (!runs(*be, Op::SampleRows, DType::F32)) continue;
      SCOPED_TRACE(be->name() + " vocab " + std::to_string(vocab));
      On<float> dl(*be, logits);
      On<kernels::SamplingRow> dp(*be, params);
      On<kernels::TokenAdjust> da(*be, adjusts);
      On<uint32_t> dm(*be, masks);
      On<int32_t> tokens(*be, size_t(rows));
      be->sample_rows(dl.get(), rows, vocab, dp.get(), da.get(), dm.get(), tokens.get());
      EXPECT_EQ(tokens.host(), want);
    }
  }
}

TEST(BackendOps, CpuIsAlwaysThereAndCudaOnlyWithADevice) {
  const auto b = all_backends();
  const size_t cpus = kernels::supported_cpu_isas().size();
  ASSERT_GE(cpus, 1u);
  EXPECT_TRUE(b[0]->is_host());
  EXPECT_NE(b[0]->name().find("scalar kernels"), std::string::npos) << b[0]->name();
  EXPECT_EQ(b.size(), cpus + (kernels::cuda_device_count() > 0 ? 1u : 0u));
  if (kernels::cuda_device_count() == 0) {
    EXPECT_THROW(kernels::make_cuda_backend(), std::runtime_error);
  }
}

}  // namespace
}  // namespace flashserve::test
