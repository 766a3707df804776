// Kernel throughput at SmolLM2-135M shapes (dim 576, ffn 1536, vocab 49152).
// bytes_per_second counts weight (matmul) or KV-cache (attention) bytes read once per iteration;
// FLOP/s counts 2 per multiply-add. BM_ReadBandwidth is the floor under decode: a token's step
// reads every weight once, so it takes at least weight bytes / this rate.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu_isa.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/threads.h"

namespace {

using namespace flashserve::kernels;

// $FLASHSERVE_THREADS sets the kernel threads, as for bench_forward: 1 measures a copy's own speed,
// apart from what a neighbour on the other core (or a shared physical core) does to the second thread.
const bool kThreadsFromEnv = [] {
  if (const char* threads = std::getenv("FLASHSERVE_THREADS")) set_num_threads(std::atoi(threads));
  return true;
}();

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  return v;
}

// Args: n_out, k, num_tokens. q8: 8-bit activations and integer dots (matmul_q8).
void BM_Matmul(benchmark::State& state, DType t, bool q8 = false) {
  const int64_t n_out = state.range(0), k = state.range(1), nt = state.range(2);
  const size_t rb = row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(n_out));
  const auto row = random_floats(size_t(k), 1);
  for (int64_t o = 0; o < n_out; ++o) quantize_row(t, row.data(), w.data() + size_t(o) * rb, k);
  const auto x = random_floats(size_t(nt * k), 2);
  std::vector<float> y(size_t(nt * n_out));
  for (auto _ : state) {
    if (q8) {
      matmul_q8(x.data(), nt, k, w.data(), t, n_out, y.data());
    } else {
      matmul(x.data(), nt, k, w.data(), t, n_out, y.data());
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * int64_t(w.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(nt * k * n_out), benchmark::Counter::kIsIterationInvariantRate);
}

void MatmulShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n_out", "k", "tokens"});
  for (int64_t nt : {1, 64})
    for (auto [n_out, k] : {std::pair<int64_t, int64_t>{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}})
      b->Args({n_out, k, nt});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Matmul, F32, DType::F32)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, F16, DType::F16)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q8_0, DType::Q8_0)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q4_0, DType::Q4_0)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q4_1, DType::Q4_1)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q8_0_q8, DType::Q8_0, true)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q4_0_q8, DType::Q4_0, true)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q4_1_q8, DType::Q4_1, true)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q5_0, DType::Q5_0)->Apply(MatmulShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q5_0_q8, DType::Q5_0, true)->Apply(MatmulShapes);

// Runs a benchmark on compiled copy kCpuIsas[index] of the CPU kernels (labelled with its name), or
// skips it where this CPU cannot; the copy in use before comes back at the end.
class OnKernelCopy {
 public:
  OnKernelCopy(benchmark::State& state, int64_t index) : isa_(kCpuIsas[index]), before_(cpu_isa()) {
    if (!cpu_supports(isa_)) {
      state.SkipWithError((std::string("this CPU cannot run the ") + cpu_isa_name(isa_) + " kernels").c_str());
      return;
    }
    set_cpu_isa(isa_);
    state.SetLabel(cpu_isa_name(isa_));
  }
  ~OnKernelCopy() { set_cpu_isa(before_); }
  bool runs() const { return cpu_isa() == isa_; }

 private:
  CpuIsa isa_, before_;
};

// The server's path for every packed format (kernels::q8_packs) with 8-bit activations: rows packed at load
// (pack_rows_for_q8), on one compiled copy of the kernels (kernels/cpu_isa.h: 1 avx2 .. 5 avx512-amx).
// Args: n_out, k, num_tokens, kernels.
void BM_MatmulPacked(benchmark::State& state, DType t) {
  const int64_t n_out = state.range(0), k = state.range(1), nt = state.range(2);
  const OnKernelCopy copy(state, state.range(3));
  if (!copy.runs()) return;
  const size_t rb = row_bytes(t, k);
  std::vector<uint8_t> w(rb * size_t(n_out)), packed(q8_packed_bytes(t, n_out, k));
  const auto row = random_floats(size_t(k), 1);
  for (int64_t o = 0; o < n_out; ++o) quantize_row(t, row.data(), w.data() + size_t(o) * rb, k);
  pack_rows_for_q8(w.data(), t, n_out, k, packed.data());
  const auto x = random_floats(size_t(nt * k), 2);
  std::vector<float> y(size_t(nt * n_out));
  for (auto _ : state) {
    matmul_q8_packed(x.data(), nt, k, packed.data(), t, n_out, y.data());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * int64_t(w.size()));
  state.counters["FLOP/s"] = benchmark::Counter(2.0 * double(nt * k * n_out), benchmark::Counter::kIsIterationInvariantRate);
}

void PackedShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n_out", "k", "tokens", "kernels"});
  for (int64_t isa : {1, 4, 5})
    for (int64_t nt : {1, 16, 64})
      for (auto [n_out, k] : {std::pair<int64_t, int64_t>{1536, 576}, {576, 1536}, {49152, 576}}) b->Args({n_out, k, nt, isa});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// The K-quants at TinyLlama-1.1B's shapes, as BM_Matmul's Q4_K_q8 and Q6_K_q8 (the same arithmetic
// unpacked); 512 tokens is a prefill's, 8-24 around where AMX tiles take over from vectors.
void PackedSuperBlockShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n_out", "k", "tokens", "kernels"});
  for (int64_t isa : {1, 4, 5})
    for (int64_t nt : {1, 8, 12, 16, 24, 32, 64, 512})
      for (auto [n_out, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}})
        b->Args({n_out, k, nt, isa});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_MatmulPacked, Q4_1, DType::Q4_1)->Apply(PackedShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q8_0, DType::Q8_0)->Apply(PackedShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q2_K, DType::Q2_K)->Apply(PackedSuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q3_K, DType::Q3_K)->Apply(PackedSuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q4_K, DType::Q4_K)->Apply(PackedSuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q5_K, DType::Q5_K)->Apply(PackedSuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, Q6_K, DType::Q6_K)->Apply(PackedSuperBlockShapes);
BENCHMARK_CAPTURE(BM_MatmulPacked, IQ4_XS, DType::IQ4_XS)->Apply(PackedSuperBlockShapes);

// The super-block formats need k in whole 256s: TinyLlama-1.1B's shapes (dim 2048, ffn 5632).
void SuperBlockShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n_out", "k", "tokens"});
  for (int64_t nt : {1, 64})
    for (auto [n_out, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {5632, 2048}, {2048, 5632}}) b->Args({n_out, k, nt});
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Matmul, Q4_K, DType::Q4_K)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q4_K_q8, DType::Q4_K, true)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q5_K_q8, DType::Q5_K, true)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q6_K, DType::Q6_K)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_Matmul, Q6_K_q8, DType::Q6_K, true)->Apply(SuperBlockShapes);
BENCHMARK_CAPTURE(BM_Matmul, IQ4_XS_q8, DType::IQ4_XS, true)->Apply(SuperBlockShapes);

// SmolLM2 attention geometry: 9 query heads over 3 KV heads of 64 dims, 16-position blocks.
// Args: sequences, context length, queries per sequence (1 = decode, context = prefill), kernels.
void BM_PagedAttention(benchmark::State& state, DType kv_type) {
  const int32_t num_seqs = int32_t(state.range(0)), ctx = int32_t(state.range(1)), nq = int32_t(state.range(2));
  const OnKernelCopy copy(state, state.range(3));
  if (!copy.runs()) return;
  const KvLayout layout{16, 3, 64};
  const int32_t heads = 9, blocks_per_seq = (ctx + layout.block_size - 1) / layout.block_size;
  const int64_t kv_row = int64_t(layout.num_kv_heads) * layout.head_dim;
  const size_t cache_floats = size_t(num_seqs) * size_t(blocks_per_seq) * layout.block_size * size_t(kv_row);
  std::vector<uint8_t> k_cache(row_bytes(kv_type, int64_t(cache_floats))), v_cache(k_cache.size());
  quantize_row(kv_type, random_floats(cache_floats, 3).data(), k_cache.data(), int64_t(cache_floats));
  quantize_row(kv_type, random_floats(cache_floats, 4).data(), v_cache.data(), int64_t(cache_floats));
  std::vector<int32_t> tables(size_t(num_seqs * blocks_per_seq));
  for (size_t i = 0; i < tables.size(); ++i) tables[i] = int32_t((i * 7919) % tables.size());  // scattered blocks
  std::vector<int32_t> query_start(size_t(num_seqs) + 1), context_lens(size_t(num_seqs), ctx);
  for (int32_t s = 0; s <= num_seqs; ++s) query_start[size_t(s)] = s * nq;
  const AttentionBatch batch{query_start.data(), context_lens.data(), tables.data(), num_seqs, blocks_per_seq, nq, ctx};
  const auto q = random_floats(size_t(num_seqs) * size_t(nq) * heads * layout.head_dim, 5);
  std::vector<float> out(q.size());
  for (auto _ : state) {
    paged_attention(q.data(), k_cache.data(), v_cache.data(), kv_type, layout, batch, heads, 0.125f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  // Positions attended summed over queries (causal): each costs a K dot and a V axpy per head.
  double attended = 0;
  for (int32_t i = 0; i < nq; ++i) attended += double(ctx - nq + i + 1);
  attended *= num_seqs;
  state.SetBytesProcessed(state.iterations() * int64_t(2 * k_cache.size()));
  state.counters["FLOP/s"] = benchmark::Counter(attended * heads * 4.0 * layout.head_dim,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
// 16 sequences at 256: the serving benchmark's decode step (flashserve-bench --concurrency 16).
// Prefill of 512, 2048 and 4096 tokens: the long prompts whose K/V the query tiles read once a tile.
// The cache in f16 (the server's default) and f32.
void AttentionShapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"seqs", "ctx", "queries", "kernels"})
    ->ArgsProduct({{1}, {512, 2048}, {1}, {1, 4}})
    ->ArgsProduct({{8}, {1024}, {1}, {1, 4}})
    ->ArgsProduct({{16}, {256}, {1}, {1, 4}})
    ->Args({1, 512, 512, 1})
    ->Args({1, 512, 512, 4})
    ->Args({1, 2048, 2048, 4})
    ->Args({1, 4096, 4096, 4})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
}
BENCHMARK_CAPTURE(BM_PagedAttention, f16, DType::F16)->Apply(AttentionShapes);
BENCHMARK_CAPTURE(BM_PagedAttention, f32, DType::F32)->Apply(AttentionShapes);

// Reads a buffer far larger than the caches on the kernel threads in runs of pieces (Split::Runs,
// as the matmuls split their rows), summing it so no read is skipped. Arg: MiB.
void BM_ReadBandwidth(benchmark::State& state) {
  constexpr size_t kPieces = 256;
  const size_t words = size_t(state.range(0)) << 17;  // 8-byte words per MiB
  std::vector<uint64_t> data(words, 1);
  struct Job {
    const uint64_t* data;
    size_t words;
    std::vector<uint64_t> sums;  // piece p's at 8 p: a cache line each
  } job{data.data(), words, std::vector<uint64_t>(8 * kPieces)};
  for (auto _ : state) {
    run_parallel(
        int64_t(kPieces),
        [](void* ctx, int64_t begin, int64_t end) {
          auto& j = *static_cast<Job*>(ctx);
          for (int64_t p = begin; p < end; ++p) {
            uint64_t s = 0;
            for (size_t i = j.words * size_t(p) / kPieces; i < j.words * size_t(p + 1) / kPieces; ++i) s += j.data[i];
            j.sums[8 * size_t(p)] = s;
          }
        },
        &job, Split::Runs);
    benchmark::DoNotOptimize(job.sums.data());
  }
  state.SetBytesProcessed(state.iterations() * int64_t(words * sizeof(uint64_t)));
}
BENCHMARK(BM_ReadBandwidth)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
