// End-to-end decode on the real SmolLM2-135M (Q4_1) through the engine, GPU against CPU in the same
// run: N requests of a 32-token prompt each generate 256 tokens greedily, so after the first step
// every step decodes a batch of N. Items are generated tokens (prefill included in the time).
//   BM_Decode/device:0|1/graphs:0|1/invariant:0|1/seqs:N   device 0 = CPU runner, 1 = CUDA runner;
//   invariant:1 is --batch-invariant, whose price this measures
// Without a CUDA device the GPU cases report an error and the CPU ones still run.
// Model: $FLASHSERVE_MODEL, else the project cache (scripts/fetch_model.sh).
#include <benchmark/benchmark.h>

#include <memory>
#include <random>

#include "bench/real_model.h"
#include "kernels/backend.h"
#include "scheduler/engine.h"

namespace flashserve {
namespace {

constexpr int32_t kPromptTokens = 32, kOutputTokens = 256;

std::unique_ptr<ModelRunner> runner_for(bool cuda, bool graphs, bool invariant, int32_t seqs) {
  RunnerOptions o;
  o.max_num_seqs = seqs;
  o.cuda_graphs = graphs;
  o.batch_invariant = invariant;
  return real_runner(cuda ? "cuda" : "cpu", 2048, o);
}

void BM_Decode(benchmark::State& state) {
  const bool cuda = state.range(0) != 0, graphs = state.range(1) != 0, invariant = state.range(2) != 0;
  const int32_t seqs = int32_t(state.range(3));
  if (cuda && kernels::cuda_device_count() == 0) {
    state.SkipWithError("no CUDA device");
    return;
  }
  std::mt19937 rng(1);
  std::vector<GenerateRequest> reqs;
  for (int32_t i = 0; i < seqs; ++i) {
    std::vector<int32_t> prompt(kPromptTokens);
    for (auto& t : prompt) t = int32_t(100 + rng() % 40000);
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = kOutputTokens;
    p.ignore_eos = true;
    reqs.push_back({"r" + std::to_string(i), prompt, p});
  }
  const auto runner = runner_for(cuda, graphs, invariant, seqs);
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = seqs;
  cfg.scheduler.max_num_batched_tokens = std::max(512, seqs * kPromptTokens);
  int64_t generated = 0;
  for (auto _ : state) {
    Engine engine(*runner, real_model().tokenizer(), cfg);
    for (const GenerateRequest& r : reqs) {
      if (engine.submit(r, [&](const RequestOutput& o) { generated += int64_t(o.tokens.size()); })) std::abort();
    }
    while (engine.step()) {
    }
  }
  state.SetItemsProcessed(generated);
}

void cases(benchmark::internal::Benchmark* b) {
  b->ArgNames({"device", "graphs", "invariant", "seqs"});
  for (int64_t seqs : {1, 8, 64}) {
    b->Args({0, 0, 0, seqs});
    b->Args({1, 0, 0, seqs});
    b->Args({1, 1, 0, seqs});
    b->Args({1, 1, 1, seqs});
  }
}
BENCHMARK(BM_Decode)->Apply(cases)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace flashserve
