// Offline serving throughput on the real SmolLM2-135M (Q4_1), CPU: a fixed set of requests
// submitted at once and run to completion through the engine. Items are generated tokens.
//   BM_Offline/max_num_seqs:N   32 requests, prompts 16-128 tokens, outputs 16-64 tokens
//   BM_SharedPrefix/prefix_cache:0|1   32 requests sharing a 256-token system prompt
// Model: $FLASHSERVE_MODEL, else the project cache (scripts/fetch_model.sh).
#include <benchmark/benchmark.h>

#include <random>

#include "bench/real_model.h"
#include "model/model_runner.h"
#include "scheduler/engine.h"

namespace flashserve {
namespace {

std::vector<int32_t> random_tokens(std::mt19937& rng, int32_t n) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(100 + rng() % 40000);
  return t;
}

SamplingParams fixed_length(int32_t n) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

// Runs all requests to completion; returns generated tokens.
int64_t run(const std::vector<GenerateRequest>& reqs, const EngineConfig& cfg) {
  const auto runner = real_runner("cpu", 2048);
  Engine engine(*runner, real_model().tokenizer(), cfg);
  int64_t generated = 0;
  for (const GenerateRequest& r : reqs) {
    if (engine.submit(r, [&](const RequestOutput& o) { generated += int64_t(o.tokens.size()); })) std::abort();
  }
  while (engine.step()) {
  }
  return generated;
}

void BM_Offline(benchmark::State& state) {
  std::mt19937 rng(1);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 32; ++i) {
    reqs.push_back({"r" + std::to_string(i), random_tokens(rng, 16 + int32_t(rng() % 113)),
                    fixed_length(16 + int32_t(rng() % 49))});
  }
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = int32_t(state.range(0));
  int64_t generated = 0;
  for (auto _ : state) generated += run(reqs, cfg);
  state.SetItemsProcessed(generated);
}
BENCHMARK(BM_Offline)->ArgName("max_num_seqs")->Arg(1)->Arg(4)->Arg(16)->Arg(64)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_SharedPrefix(benchmark::State& state) {
  std::mt19937 rng(2);
  const std::vector<int32_t> system = random_tokens(rng, 256);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 32; ++i) {
    std::vector<int32_t> prompt = system;
    for (int32_t t : random_tokens(rng, 16 + int32_t(rng() % 17))) prompt.push_back(t);
    reqs.push_back({"r" + std::to_string(i), prompt, fixed_length(16)});
  }
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = 16;
  cfg.enable_prefix_caching = state.range(0) != 0;
  int64_t generated = 0;
  for (auto _ : state) generated += run(reqs, cfg);
  state.SetItemsProcessed(generated);
}
BENCHMARK(BM_SharedPrefix)->ArgName("prefix_cache")->Arg(0)->Arg(1)
    ->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace flashserve
