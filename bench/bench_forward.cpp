// End-to-end forward steps on the real SmolLM2-135M (Q4_1) on the CPU: prefill throughput, decode
// latency against context length, and decode throughput of a batch (weights read once per step).
// Each runs the exact path (q8:0: f32 activations, f32 KV cache) and the server's defaults (q8:1:
// 8-bit activations, f16 KV cache) side by side.
// BM_DecodeOnKernels repeats one decode on each compiled copy of the CPU kernels this CPU runs
// (kernels/cpu_isa.h: 0 scalar, 1 avx2, 2 avx2-vnni, 3 avx512, 4 avx512-vnni, 5 avx512-amx), BM_DecodeOnThreads on 1 and 2
// kernel threads. The others run on the default: one thread per physical core.
// BM_RunnerStepOverhead is the runner's host share of a decode step alone (no op runs).
// Model: $FLASHSERVE_MODEL, else the project cache (scripts/fetch_model.sh).
#include <benchmark/benchmark.h>

#include <array>
#include <numeric>

#include "bench/real_model.h"
#include "kernels/cpu_isa.h"
#include "kernels/recording_backend.h"
#include "kernels/threads.h"

namespace flashserve {
namespace {

constexpr int32_t kBlockSize = 16;

std::vector<int32_t> block_range(int32_t first, int32_t n) {
  std::vector<int32_t> b(n);
  std::iota(b.begin(), b.end(), first);
  return b;
}

std::vector<int32_t> some_tokens(int32_t n) {
  std::vector<int32_t> t(n);
  for (int32_t i = 0; i < n; ++i) t[i] = 100 + (i * 7919) % 40000;
  return t;
}

void BM_Prefill(benchmark::State& state) {
  const int32_t n = int32_t(state.range(0));
  RunnerOptions o;
  o.block_size = kBlockSize;
  o.cpu_q8_activations = state.range(1) != 0;
  o.kv_dtype = o.cpu_q8_activations ? "f16" : "f32";
  auto cache = real_runner("cpu", n / kBlockSize + 1, o);
  const SequenceInput seq{0, some_tokens(n), {block_range(0, n / kBlockSize + 1)}, LogitRows::Last};
  for (auto _ : state) benchmark::DoNotOptimize(cache->forward(ForwardBatch{{seq}}));
  state.SetItemsProcessed(state.iterations() * n);  // items = prompt tokens
}
BENCHMARK(BM_Prefill)
    ->ArgNames({"tokens", "q8"})
    ->ArgsProduct({{32, 128, 512}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// `batch` sequences, each with `context` tokens cached, each decoding one token.
void BM_Decode(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(0)), context = int32_t(state.range(1));
  const int32_t blocks_per_seq = context / kBlockSize + 1;
  RunnerOptions o;
  o.block_size = kBlockSize;
  o.cpu_q8_activations = state.range(2) != 0;
  o.kv_dtype = o.cpu_q8_activations ? "f16" : "f32";
  auto cache = real_runner("cpu", batch * blocks_per_seq, o);
  ForwardBatch step;
  for (int32_t s = 0; s < batch; ++s) {
    SequenceInput prefill{0, some_tokens(context), {block_range(s * blocks_per_seq, blocks_per_seq)}, LogitRows::None};
    cache->forward(ForwardBatch{{prefill}});
    step.seqs.push_back({context, {42}, prefill.block_tables, LogitRows::Last});
  }
  for (auto _ : state) benchmark::DoNotOptimize(cache->forward(step));
  state.SetItemsProcessed(state.iterations() * batch);  // items = generated tokens
}
BENCHMARK(BM_Decode)
    ->ArgNames({"batch", "context", "q8"})
    ->Args({1, 128, 0})->Args({1, 128, 1})->Args({1, 1024, 0})->Args({1, 1024, 1})
    ->Args({4, 128, 0})->Args({4, 128, 1})->Args({8, 128, 1})->Args({16, 128, 0})->Args({16, 128, 1})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// One sequence with 128 tokens cached, decoding one token per iteration.
void decode_128(benchmark::State& state, bool q8) {
  const int32_t context = 128, blocks = context / kBlockSize + 1;
  RunnerOptions o;
  o.block_size = kBlockSize;
  o.cpu_q8_activations = q8;
  o.kv_dtype = q8 ? "f16" : "f32";
  auto cache = real_runner("cpu", blocks, o);
  SequenceInput prefill{0, some_tokens(context), {block_range(0, blocks)}, LogitRows::None};
  cache->forward(ForwardBatch{{prefill}});
  const ForwardBatch step{{{context, {42}, prefill.block_tables, LogitRows::Last}}};
  for (auto _ : state) benchmark::DoNotOptimize(cache->forward(step));
  state.SetItemsProcessed(state.iterations());
}

// Decode against a long context with each KV cache type the server offers (kv: 0 f16, the default;
// 1 q8_0, about half its bytes; 2 fp8, half), 8-bit activations: what reading and decoding a cache
// block costs once attention dominates. `batch` sequences, each with `context` tokens cached.
void BM_DecodeKvType(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(0)), context = int32_t(state.range(1));
  const int32_t blocks_per_seq = context / kBlockSize + 1;
  RunnerOptions o;
  o.block_size = kBlockSize;
  o.cpu_q8_activations = true;
  o.kv_dtype = std::array{"f16", "q8_0", "fp8"}[size_t(state.range(2))];
  auto cache = real_runner("cpu", batch * blocks_per_seq, o);
  ForwardBatch step;
  for (int32_t s = 0; s < batch; ++s) {
    for (int32_t done = 0; done < context; done += 512) {  // the prompt in chunks, as the server takes it
      const int32_t n = std::min(512, context - done);
      std::vector<int32_t> chunk = some_tokens(context);
      SequenceInput prefill{done, std::vector<int32_t>(chunk.begin() + done, chunk.begin() + done + n),
                            {block_range(s * blocks_per_seq, blocks_per_seq)}, LogitRows::None};
      cache->forward(ForwardBatch{{prefill}});
    }
    step.seqs.push_back({context, {42}, {block_range(s * blocks_per_seq, blocks_per_seq)}, LogitRows::Last});
  }
  for (auto _ : state) benchmark::DoNotOptimize(cache->forward(step));
  state.SetItemsProcessed(state.iterations() * batch);  // items = generated tokens
}
BENCHMARK(BM_DecodeKvType)
    ->ArgNames({"batch", "context", "kv"})
    ->ArgsProduct({{1, 4}, {4096}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// Speculative verification: `batch` sequences with 256 tokens cached each compute their last token
// and `drafts` drafts, every row sampled greedily as the engine asks (drafts 0: a plain decode
// step), on the server's defaults (8-bit activations, f16 KV cache). What a step with drafts costs
// over one without decides when drafting pays (Scheduler::add_drafts, StepBudget::draft_threshold).
void BM_Verify(benchmark::State& state) {
  const int32_t batch = int32_t(state.range(0)), drafts = int32_t(state.range(1)), context = 256;
  const int32_t blocks = (context + drafts + 1) / kBlockSize + 1;
  RunnerOptions o;
  o.block_size = kBlockSize;
  o.cpu_q8_activations = true;
  o.kv_dtype = "f16";
  auto cache = real_runner("cpu", batch * blocks, o);
  ForwardBatch step;
  SamplingStep greedy;
  greedy.row.temperature = 0.0f;
  for (int32_t s = 0; s < batch; ++s) {
    SequenceInput prefill{0, some_tokens(context), {block_range(s * blocks, blocks)}, LogitRows::None};
    cache->forward(ForwardBatch{{prefill}});
    SequenceInput& q = step.seqs.emplace_back(SequenceInput{context, some_tokens(drafts + 1), prefill.block_tables});
    q.sample = int32_t(step.samples.size());
    q.last_rows = drafts + 1;
    step.samples.insert(step.samples.end(), size_t(drafts + 1), greedy);
  }
  for (auto _ : state) benchmark::DoNotOptimize(cache->forward(step));
  state.SetItemsProcessed(state.iterations() * batch * (drafts + 1));  // items = rows verified
}
BENCHMARK(BM_Verify)
    ->ArgNames({"batch", "drafts"})
    ->ArgsProduct({{1}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 15}})
    ->ArgsProduct({{16}, {0, 1, 3}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeOnThreads(benchmark::State& state) {
  const int before = kernels::num_threads();
  kernels::set_num_threads(int(state.range(0)));
  decode_128(state, state.range(1) != 0);
  kernels::set_num_threads(before);
}
BENCHMARK(BM_DecodeOnThreads)
    ->ArgNames({"threads", "q8"})
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_DecodeOnKernels(benchmark::State& state) {
  const kernels::CpuIsa isa = kernels::kCpuIsas[state.range(0)], before = kernels::cpu_isa();
  if (!kernels::cpu_supports(isa)) {
    state.SkipWithError((std::string("this CPU cannot run the ") + kernels::cpu_isa_name(isa) + " kernels").c_str());
    return;
  }
  kernels::set_cpu_isa(isa);
  decode_128(state, state.range(1) != 0);
  state.SetLabel(kernels::cpu_isa_name(isa));
  kernels::set_cpu_isa(before);
}
BENCHMARK(BM_DecodeOnKernels)
    ->ArgNames({"kernels", "q8"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// The real model's LlamaRunner on a backend that runs nothing (kernels::RecordingBackend): `running`
// sequences the runner keeps, from a 1,024-token context, each step one token each, sampled at
// temperature 1, a new block every 16 steps (the engine's step contract). What a step costs is the
// runner's host work a GPU waits on between steps: checking, flattening, staging the inputs and the
// block tables, the sampling rows. The recording backend's copies cost nothing, so transfers are
// not in it. Items: steps.
void BM_RunnerStepOverhead(benchmark::State& state) {
  const int32_t running = int32_t(state.range(0));
  constexpr int32_t kContext = 1024, kSteps = 1024;
  const int32_t blocks_per_seq = (kContext + kSteps) / kBlockSize + 1;
  RunnerConfig cfg;
  cfg.block_size = kBlockSize;
  cfg.max_num_seqs = cfg.max_num_batched_tokens = running;
  LlamaRunner runner(real_model(), std::make_unique<kernels::RecordingBackend>(), cfg,
                     [&](const kernels::Backend&, size_t) { return running * blocks_per_seq; });
  ForwardBatch step;
  for (int32_t s = 0; s < running; ++s) {
    SequenceInput in{kContext, {42}, {block_range(s * blocks_per_seq, kContext / kBlockSize + 1)}, LogitRows::Last, s};
    in.kept_id = s;
    step.seqs.push_back(in);
    step.samples.push_back({});
  }
  runner.forward(step);
  int32_t context = kContext;
  for (auto _ : state) {
    ++context;
    const bool new_block = context % kBlockSize == 0;
    for (int32_t s = 0; s < running; ++s) {
      SequenceInput& in = step.seqs[size_t(s)];
      in.num_computed_tokens = context;
      in.block_tables.clear();
      if (new_block) in.block_tables.push_back({s * blocks_per_seq + context / kBlockSize});
      step.samples[size_t(s)].row.uniform = 0.5;
    }
    benchmark::DoNotOptimize(runner.forward(step));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RunnerStepOverhead)
    ->ArgName("running")->Arg(64)->Arg(256)
    ->Iterations(1000)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace flashserve
