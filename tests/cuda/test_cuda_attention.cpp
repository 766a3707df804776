// CUDA KV writes and attention against the CPU twin, run on the same rounded cache values so
// only the arithmetic differs, and against the f64 reference on the unrounded K/V, so that bound
// also covers the cache rounding. Device tests skip without a GPU; the argument checks run anywhere.
#include <gtest/gtest.h>

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/paged_attention.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/kernels/reference.h"

namespace flashserve {
namespace {

using kernels::DType;
using kernels::KvLayout;
using test::DeviceBuffer;
using CudaAttention = test::CudaTest;
namespace kc = kernels::cuda;

// Decode against the CPU twin on identical rounded inputs: only f32 rounding differs (dot products of
// at most 256 terms, sums of at most 2000 weights, exp2f vs expf), far inside 1e-4 * (1 + |cpu|).
constexpr double kCpuTol = 1e-4;
// Prefill runs on tensor cores, which take the queries and the softmax weights rounded to the cache
// type (u = 2^-11 for F16, 2^-8 for BF16): the output moves by a few u. The host emulator measured
// at most 2.6e-4 (F16) and 2.3e-3 (BF16) times (1 + |cpu|) on these problems; the bounds leave about
// a factor 3 for the hardware's own accumulation order. Decode against prefill uses them too.
// An fp8 cache's tiles are f16 (attention_tile.cuh), so its tensor cores round as f16's.
double tensor_core_tol(DType t) { return t == DType::BF16 ? 8e-3 : 1e-3; }
// Against the f64 reference on unrounded K/V (|k|, |v| <= 1, |q| <= 2): the cache rounds K and V by
// at most half an ulp, 2^-12 for F16 and 2^-9 for BF16. That moves the output, a convex combination
// of V rows, by about as much, plus the shift of the softmax weights from the perturbed scores:
// 1e-3 * (1 + |ref|) for F16 and 1e-2 * (1 + |ref|) for BF16 leave about a factor 2 of margin.
// F8_E4M3 rounds by up to 2^-4 relative (2^-10 absolute below 2^-6): the emulator measured at most
// 0.040 (prefill) and 0.021 (decode); 8e-2 leaves a factor 2.
double ref_tol(DType t) { return t == DType::F16 ? 1e-3 : t == DType::BF16 ? 1e-2 : 8e-2; }

constexpr int32_t kBlockSize = 16;

// x as a cache of type t holds it: the CPU's rounding (kernels/dtype.h), which kv_write must match.
std::vector<uint8_t> encode(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> bytes(kernels::row_bytes(t, int64_t(x.size())));
  kernels::quantize_row(t, x.data(), bytes.data(), int64_t(x.size()));
  return bytes;
}
float stored(DType t, float x) {
  const std::vector<uint8_t> bytes = encode(t, {x});
  float y;
  kernels::dequantize_row(t, bytes.data(), &y, 1);
  return y;
}

struct Config {
  DType kv_type;
  int32_t head_dim;
  int32_t num_heads;
  int32_t num_kv_heads;
};

std::string describe(const Config& c) {
  return std::string(kernels::dtype_name(c.kv_type)) + " head_dim " + std::to_string(c.head_dim) + " heads " +
         std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads);
}

// F16, BF16 and F8_E4M3, head dims 64, 128 and 256 (Gemma), GQA ratios 1, 3 (SmolLM2's 9/3) and 4.
std::vector<Config> all_configs() {
  std::vector<Config> out;
  for (DType t : {DType::F16, DType::BF16, DType::F8_E4M3})
    for (int32_t hd : {64, 128, 256})
      for (auto [h, kvh] : {std::pair{4, 4}, {9, 3}, {8, 2}}) out.push_back({t, hd, h, kvh});
  return out;
}

struct SeqSpec {
  int32_t context_len;
  int32_t num_queries;  // the last num_queries positions; earlier ones were computed by earlier steps
};

int32_t blocks_for(int32_t positions) { return (positions + kBlockSize - 1) / kBlockSize; }

// A ragged batch: unrounded K/V per sequence, queries, and shuffled block tables whose unused
// entries name a spare block that is never written.
struct Problem {
  Config cfg;
  KvLayout layout;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<float>> k, v;  // per sequence: [context_len][num_kv_heads][head_dim]
  std::vector<float> q;                  // [total queries][num_heads][head_dim]
  std::vector<int32_t> tables;           // [num_seqs][max_blocks]
  int32_t max_blocks = 0;
  int32_t num_blocks = 0;

  int64_t kv_row() const { return int64_t(layout.num_kv_heads) * layout.head_dim; }
  int64_t q_row() const { return int64_t(cfg.num_heads) * cfg.head_dim; }
  int32_t num_seqs() const { return int32_t(specs.size()); }
  const int32_t* table(size_t s) const { return &tables[s * size_t(max_blocks)]; }
  int32_t slot(size_t s, int32_t pos) const { return table(s)[pos / kBlockSize] * kBlockSize + pos % kBlockSize; }
  float scale() const { return 1.0f / std::sqrt(float(cfg.head_dim)); }
  size_t cache_elems() const { return size_t(num_blocks) * kBlockSize * size_t(kv_row()); }
  size_t out_elems() const { return q.size(); }
  int32_t max_queries() const {
    int32_t m = 0;
    for (const SeqSpec& sp : specs) m = std::max(m, sp.num_queries);
    return m;
  }
};

// table_positions: how many positions each block table can address (at least the longest context),
// as a CUDA graph's tables are sized for the model's limit.
Problem make_problem(std::mt19937& rng, const Config& cfg, std::vector<SeqSpec> specs, int32_t table_positions = 0) {
  Problem p;
  p.cfg = cfg;
  p.layout = {kBlockSize, cfg.num_kv_heads, cfg.head_dim};
  p.specs = std::move(specs);
  int32_t used = 0, total_queries = 0;
  p.max_blocks = blocks_for(table_positions);
  for (const SeqSpec& sp : p.specs) {
    p.k.push_back(test::random_floats(rng, size_t(sp.context_len * p.kv_row())));
    p.v.push_back(test::random_floats(rng, size_t(sp.context_len * p.kv_row())));
    used += blocks_for(sp.context_len);
    p.max_blocks = std::max(p.max_blocks, blocks_for(sp.context_len));
    total_queries += sp.num_queries;
  }
  p.q = test::random_floats(rng, size_t(total_queries * p.q_row()), -2.0f, 2.0f);
  p.num_blocks = used + 1;
  std::vector<int32_t> ids(size_t(p.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.tables.assign(p.specs.size() * size_t(p.max_blocks), ids.back());  // ids.back() is the spare
  size_t next = 0;
  for (size_t s = 0; s < p.specs.size(); ++s)
    for (int32_t b = 0; b < blocks_for(p.specs[s].context_len); ++b)
      p.tables[s * size_t(p.max_blocks) + size_t(b)] = ids[next++];
  return p;
}

// Every position of every sequence written through cuda::kv_write (with a padding token of slot -1
// in the middle), and a CPU f32 cache holding the same values rounded to the cache type. Every
// slot starts as a NaN of the cache type, so reading a slot that was never written poisons the output.
struct Caches {
  DeviceBuffer<uint8_t> gpu_k, gpu_v;
  std::vector<float> cpu_k, cpu_v;

  explicit Caches(const Problem& p)
      : gpu_k(encode(p.cfg.kv_type, std::vector<float>(p.cache_elems(), NAN))),
        gpu_v(encode(p.cfg.kv_type, std::vector<float>(p.cache_elems(), NAN))),
        cpu_k(p.cache_elems(), NAN),
        cpu_v(p.cache_elems(), NAN) {
    std::vector<float> k, v;
    std::vector<int32_t> slots;
    for (size_t s = 0; s < p.specs.size(); ++s) {
      k.insert(k.end(), p.k[s].begin(), p.k[s].end());
      v.insert(v.end(), p.v[s].begin(), p.v[s].end());
      for (int32_t pos = 0; pos < p.specs[s].context_len; ++pos) slots.push_back(p.slot(s, pos));
      if (s == 0) {  // the padding token: its huge values would show wherever they landed
        k.insert(k.end(), size_t(p.kv_row()), 1000.0f);
        v.insert(v.end(), size_t(p.kv_row()), 1000.0f);
        slots.push_back(-1);
      }
    }
    DeviceBuffer<float> dk(k), dv(v);
    DeviceBuffer<int32_t> dslots(slots);
    kc::kv_write(p.layout, p.cfg.kv_type, gpu_k.get(), gpu_v.get(), dk.get(), dv.get(), dslots.get(),
                 int64_t(slots.size()), nullptr);
    FLASHSERVE_CUDA_CHECK(cudaDeviceSynchronize());
    for (float& x : k) x = stored(p.cfg.kv_type, x);
    for (float& x : v) x = stored(p.cfg.kv_type, x);
    kernels::kv_write(p.layout, DType::F32, cpu_k.data(), cpu_v.data(), k.data(), v.data(), slots.data(), int64_t(slots.size()));
  }
};

std::vector<int32_t> query_starts(const Problem& p) {
  std::vector<int32_t> starts{0};
  for (const SeqSpec& sp : p.specs) starts.push_back(starts.back() + sp.num_queries);
  return starts;
}

std::vector<int32_t> context_lens(const Problem& p) {
  std::vector<int32_t> lens;
  for (const SeqSpec& sp : p.specs) lens.push_back(sp.context_len);
  return lens;
}

// p.tables as a runner that keeps each sequence's row across steps holds them (AttentionBatch::
// table_rows): sequence s in row 2 * (n - 1 - s) + 1, the rows between naming only sequence 0's
// first block, so a sequence that read another's row or one between would get other results.
std::vector<int32_t> resident_table_rows(const Problem& p) {
  std::vector<int32_t> rows;
  for (int32_t s = 0; s < p.num_seqs(); ++s) rows.push_back(2 * (p.num_seqs() - 1 - s) + 1);
  return rows;
}
std::vector<int32_t> resident_tables(const Problem& p) {
  const auto rows = resident_table_rows(p);
  std::vector<int32_t> t(size_t(2 * p.num_seqs()) * size_t(p.max_blocks), p.tables.front());
  for (int32_t s = 0; s < p.num_seqs(); ++s)
    std::copy(p.table(size_t(s)), p.table(size_t(s)) + p.max_blocks, t.begin() + ptrdiff_t(rows[size_t(s)]) * p.max_blocks);
  return t;
}

// The batch in device memory. The grid bounds are looser than the batch needs, as under a CUDA graph.
struct GpuBatch {
  DeviceBuffer<int32_t> query_start, context_lens_buf, tables, table_rows;
  kernels::AttentionBatch batch;

  GpuBatch(const Problem& p, int32_t max_num_queries, bool resident = false)
      : query_start(query_starts(p)),
        context_lens_buf(context_lens(p)),
        tables(resident ? resident_tables(p) : p.tables),
        table_rows(resident_table_rows(p)) {
    batch.query_start = query_start.get();
    batch.context_lens = context_lens_buf.get();
    batch.block_tables = tables.get();
    batch.num_seqs = p.num_seqs();
    batch.max_blocks_per_seq = p.max_blocks;
    batch.max_num_queries = max_num_queries;
    batch.max_context_len = p.max_blocks * kBlockSize;
    if (resident) batch.table_rows = table_rows.get();
  }
};

std::vector<float> cpu_attention(const Problem& p, const Caches& c) {
  const auto starts = query_starts(p);
  const auto lens = context_lens(p);
  const kernels::AttentionBatch b{starts.data(), lens.data(), p.tables.data(), p.num_seqs(), p.max_blocks,
                                  p.max_queries(), p.max_blocks * kBlockSize};
  std::vector<float> out(p.out_elems(), NAN);
  kernels::paged_attention(p.q.data(), c.cpu_k.data(), c.cpu_v.data(), DType::F32, p.layout, b, p.cfg.num_heads,
                           p.scale(), out.data());
  return out;
}

// Rows the kernel leaves unwritten stay NaN and fail every comparison.
std::vector<float> gpu_prefill(const Problem& p, Caches& c, bool resident = false) {
  GpuBatch b(p, p.max_queries() + 40, resident);
  DeviceBuffer<float> q(p.q), out(std::vector<float>(p.out_elems(), NAN));
  kc::prefill_attention(q.get(), c.gpu_k.get(), c.gpu_v.get(), p.cfg.kv_type, p.layout, b.batch, p.cfg.num_heads,
                        p.scale(), out.get(), nullptr);
  return out.to_host();
}

std::vector<float> gpu_decode(const Problem& p, Caches& c, bool resident = false) {
  GpuBatch b(p, 1, resident);
  DeviceBuffer<float> q(p.q), out(std::vector<float>(p.out_elems(), NAN));
  const size_t ws_bytes =
      kc::decode_attention_workspace_bytes(p.num_seqs(), p.cfg.num_heads, p.cfg.head_dim, b.batch.max_context_len);
  DeviceBuffer<float> workspace(ws_bytes / sizeof(float));
  kc::decode_attention(q.get(), c.gpu_k.get(), c.gpu_v.get(), p.cfg.kv_type, p.layout, b.batch, p.cfg.num_heads,
                       p.scale(), out.get(), workspace.get(), nullptr);
  return out.to_host();
}

// Prints the largest error it saw, so a run on a GPU records how close the bounds are.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  double tol = kCpuTol) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) / (1 + std::abs(want[i])));
  std::printf("[ precision ] %s: max |got - want| / (1 + |want|) = %.3g (bound %.3g)\n", what.c_str(), worst, tol);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
}

void expect_matches_reference(const Problem& p, const std::vector<float>& out) {
  const int64_t hd = p.cfg.head_dim, group = p.cfg.num_heads / p.cfg.num_kv_heads;
  const double tol = ref_tol(p.cfg.kv_type);
  double worst_ref = 0;
  int64_t token = 0;
  for (size_t s = 0; s < p.specs.size(); ++s) {
    for (int32_t i = 0; i < p.specs[s].num_queries; ++i, ++token) {
      const int32_t pos = p.specs[s].context_len - p.specs[s].num_queries + i;
      for (int64_t h = 0; h < p.cfg.num_heads; ++h) {
        std::vector<const float*> krows, vrows;
        for (int32_t j = 0; j <= pos; ++j) {
          krows.push_back(&p.k[s][size_t(j * p.kv_row() + (h / group) * hd)]);
          vrows.push_back(&p.v[s][size_t(j * p.kv_row() + (h / group) * hd)]);
        }
        const auto ref = test::ref_attention_row(&p.q[size_t(token * p.q_row() + h * hd)], krows, vrows, hd, p.scale());
        const float* got = &out[size_t(token * p.q_row() + h * hd)];
        for (int64_t d = 0; d < hd; ++d)
          worst_ref = std::max(worst_ref, std::abs(got[d] - ref[size_t(d)]) / (1 + std::abs(ref[size_t(d)])));
        for (int64_t d = 0; d < hd; ++d)
          ASSERT_NEAR(out[size_t(token * p.q_row() + h * hd + d)], ref[size_t(d)], tol * (1 + std::abs(ref[size_t(d)])))
              << "seq " << s << " query " << i << " head " << h << " dim " << d;
      }
    }
  }
  std::printf("[ precision ] %s: vs f64 reference: %.3g (bound %.3g)\n", describe(p.cfg).c_str(), worst_ref, tol);
}

// A one-token sequence, a whole prompt, a chunk after 63 computed positions, a long prompt crossing
// many K tiles, a decode step inside a prefill batch, and one exactly two query tiles long.
const std::vector<SeqSpec> kPrefillBatch = {{1, 1}, {17, 17}, {100, 37}, {333, 333}, {513, 1}, {64, 64}};
// Decode contexts around the 512-position partitions; tables (and so max_context_len) sized for
// 2600 positions, as a graph sized for the model's limit would pass.
const std::vector<SeqSpec> kDecodeBatch = {{1, 1}, {511, 1}, {512, 1}, {513, 1}, {2000, 1}};
constexpr int32_t kDecodeTablePositions = 2600;

TEST_F(CudaAttention, KvWriteRoundsToNearestBitExact) {
  std::mt19937 rng(61);
  const KvLayout layout{kBlockSize, 3, 64};
  const int64_t row = int64_t(layout.num_kv_heads) * layout.head_dim;
  const int32_t num_slots = 4 * kBlockSize;
  // Ties (round to even either way), half subnormals, overflow to infinity (fp8: saturation at 448)
  // and signed zeros, then random values over many magnitudes.
  std::vector<float> edges = {0.0f,    -0.0f,   1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f,
                              3e-5f,   -6e-8f,  1e-8f,           65504.0f,        65519.0f,       65520.0f,
                              -1e5f,   FLT_MAX, -FLT_MAX,        1.0625f,         1.1875f,        0x1p-10f,
                              0x3p-10f, 448.0f, 464.0f,          -465.0f,         INFINITY};
  for (DType t : {DType::F16, DType::BF16, DType::F8_E4M3}) {
    SCOPED_TRACE(kernels::dtype_name(t));
    const int64_t num_tokens = 20;
    std::vector<int32_t> slots(static_cast<size_t>(num_slots));
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(size_t(num_tokens));
    slots[3] = slots[11] = -1;  // padding tokens
    auto k = test::random_floats(rng, size_t(num_tokens * row), -1.0f, 1.0f);
    auto v = test::random_floats(rng, size_t(num_tokens * row), -1.0f, 1.0f);
    for (size_t i = 0; i < k.size(); ++i) k[i] = std::ldexp(k[i], int(i % 41) - 20);
    std::copy(edges.begin(), edges.end(), v.begin());

    const size_t elem = kernels::row_bytes(t, 1);
    const uint8_t untouched = 0x34;
    DeviceBuffer<uint8_t> kc_buf(std::vector<uint8_t>(size_t(num_slots * row) * elem, untouched));
    DeviceBuffer<uint8_t> vc_buf(std::vector<uint8_t>(size_t(num_slots * row) * elem, untouched));
    DeviceBuffer<float> dk(k), dv(v);
    DeviceBuffer<int32_t> dslots(slots);
    kc::kv_write(layout, t, kc_buf.get(), vc_buf.get(), dk.get(), dv.get(), dslots.get(), num_tokens, nullptr);
    const auto kc_host = kc_buf.to_host(), vc_host = vc_buf.to_host();

    std::vector<uint8_t> want_k(size_t(num_slots * row) * elem, untouched), want_v = want_k;
    for (int64_t tok = 0; tok < num_tokens; ++tok) {
      if (slots[size_t(tok)] < 0) continue;
      const auto row_of = [&](const std::vector<float>& x) {
        return encode(t, std::vector<float>(x.begin() + tok * row, x.begin() + (tok + 1) * row));
      };
      const std::vector<uint8_t> kb = row_of(k), vb = row_of(v);
      std::copy(kb.begin(), kb.end(), want_k.begin() + ptrdiff_t(size_t(slots[size_t(tok)] * row) * elem));
      std::copy(vb.begin(), vb.end(), want_v.begin() + ptrdiff_t(size_t(slots[size_t(tok)] * row) * elem));
    }
    for (size_t i = 0; i < want_k.size(); ++i) {
      ASSERT_EQ(kc_host[i], want_k[i]) << "K byte " << i;
      ASSERT_EQ(vc_host[i], want_v[i]) << "V byte " << i;
    }
  }
}

TEST_F(CudaAttention, PrefillMatchesCpuAndReference) {
  std::mt19937 rng(62);
  for (const Config& cfg : all_configs()) {
    SCOPED_TRACE(describe(cfg));
    const Problem p = make_problem(rng, cfg, kPrefillBatch);
    Caches c(p);
    const auto gpu = gpu_prefill(p, c);
    ASSERT_NO_FATAL_FAILURE(expect_close(gpu, cpu_attention(p, c), describe(cfg) + ": prefill vs CPU twin",
                                         tensor_core_tol(cfg.kv_type)));
    ASSERT_NO_FATAL_FAILURE(expect_matches_reference(p, gpu));
  }
}

TEST_F(CudaAttention, DecodeMatchesCpuAndReferenceAcrossPartitions) {
  std::mt19937 rng(63);
  for (const Config& cfg : all_configs()) {
    SCOPED_TRACE(describe(cfg));
    const Problem p = make_problem(rng, cfg, kDecodeBatch, kDecodeTablePositions);
    Caches c(p);
    const auto gpu = gpu_decode(p, c);
    ASSERT_NO_FATAL_FAILURE(expect_close(gpu, cpu_attention(p, c), describe(cfg) + ": decode vs CPU twin"));
    ASSERT_NO_FATAL_FAILURE(expect_matches_reference(p, gpu));
  }
}

TEST_F(CudaAttention, DecodeEqualsPrefillOnOneQueryBatch) {
  std::mt19937 rng(64);
  for (const Config& cfg : all_configs()) {
    SCOPED_TRACE(describe(cfg));
    const Problem p = make_problem(rng, cfg, kDecodeBatch, kDecodeTablePositions);
    Caches c(p);
    ASSERT_NO_FATAL_FAILURE(expect_close(gpu_decode(p, c), gpu_prefill(p, c), describe(cfg) + ": decode vs prefill",
                                         tensor_core_tol(cfg.kv_type)));
  }
}

// Rows found through table_rows give the very results of rows in batch order, in both kernels.
TEST_F(CudaAttention, ResidentTableRowsReadEachSequencesOwnRow) {
  std::mt19937 rng(65);
  for (const Config& cfg : all_configs()) {
    SCOPED_TRACE(describe(cfg));
    const Problem prefill = make_problem(rng, cfg, kPrefillBatch);
    Caches cp(prefill);
    EXPECT_EQ(gpu_prefill(prefill, cp, true), gpu_prefill(prefill, cp)) << "prefill";
    const Problem decode = make_problem(rng, cfg, kDecodeBatch, kDecodeTablePositions);
    Caches cd(decode);
    EXPECT_EQ(gpu_decode(decode, cd, true), gpu_decode(decode, cd)) << "decode";
  }
}

// The checks below run before any CUDA call, so they pass without a device too.

kernels::AttentionBatch one_query_batch() {
  kernels::AttentionBatch b;
  b.query_start = nullptr;
  b.context_lens = nullptr;
  b.block_tables = nullptr;
  b.num_seqs = 1;
  b.max_blocks_per_seq = 1;
  b.max_num_queries = 1;
  b.max_context_len = kBlockSize;
  return b;
}

void expect_both_reject(DType t, const KvLayout& layout, int32_t num_heads) {
  const auto b = one_query_batch();
  EXPECT_THROW(kc::prefill_attention(nullptr, nullptr, nullptr, t, layout, b, num_heads, 1.0f, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      kc::decode_attention(nullptr, nullptr, nullptr, t, layout, b, num_heads, 1.0f, nullptr, nullptr, nullptr),
      std::invalid_argument);
}

// The CPU's fp8 conversions against the toolkit's own (cuda_fp8.h's host code, which the device
// instruction matches): every 61st float bit pattern (each exponent, and tie and sticky bits in
// every position), and all 256 codes back.
TEST(CudaAttentionWithoutDevice, Fp8ConversionsEqualTheToolkits) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 61) {
    float f;
    const uint32_t bits = uint32_t(u);
    std::memcpy(&f, &bits, 4);
    ASSERT_EQ(kernels::fp32_to_fp8_e4m3(f), __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3)) << std::hex << bits;
  }
  for (int c = 0; c < 256; ++c) {
    const float want = __half2float(__half(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3)));
    const float got = kernels::fp8_e4m3_to_fp32(uint8_t(c));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << c;
    else EXPECT_EQ(got, want) << c;
  }
}

TEST(CudaAttentionWithoutDevice, RejectsUnsupportedHeadDim) {
  for (int32_t hd : {32, 80, 96, 512}) expect_both_reject(DType::F16, {kBlockSize, 2, hd}, 4);
}

TEST(CudaAttentionWithoutDevice, RejectsUnsupportedKvType) {
  for (DType t : {DType::F32, DType::Q8_0, DType::Q4_0}) expect_both_reject(t, {kBlockSize, 2, 64}, 4);
}

TEST(CudaAttentionWithoutDevice, RejectsHeadsNotAMultipleOfKvHeads) {
  expect_both_reject(DType::BF16, {kBlockSize, 2, 128}, 5);
}

TEST(CudaAttentionWithoutDevice, RejectsTablesShorterThanMaxContext) {
  auto b = one_query_batch();
  b.max_context_len = kBlockSize + 1;
  EXPECT_THROW(kc::prefill_attention(nullptr, nullptr, nullptr, DType::F16, {kBlockSize, 1, 64}, b, 1, 1.0f, nullptr,
                                     nullptr),
               std::invalid_argument);
}

TEST(CudaAttentionWithoutDevice, DecodeRejectsGroupsAboveEight) {
  const auto b = one_query_batch();
  EXPECT_THROW(kc::decode_attention(nullptr, nullptr, nullptr, DType::F16, {kBlockSize, 1, 64}, b, 9, 1.0f, nullptr,
                                    nullptr, nullptr),
               std::invalid_argument);
}

TEST(CudaAttentionWithoutDevice, KvWriteRejectsUnsupportedKvType) {
  for (DType t : {DType::F32, DType::Q8_0})
    EXPECT_THROW(kc::kv_write({kBlockSize, 1, 64}, t, nullptr, nullptr, nullptr, nullptr, nullptr, 1, nullptr),
                 std::invalid_argument);
}

}  // namespace
}  // namespace flashserve
