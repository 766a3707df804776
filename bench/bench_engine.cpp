// Offline serving throughput on the real SmolLM2-135M (Q4_1), CPU: a fixed set of requests
// submitted at once and run to completion through the engine. Items are generated tokens.
//   BM_Offline/max_num_seqs:N   32 requests, prompts 16-128 tokens, outputs 16-64 tokens
//   BM_SharedPrefix/prefix_cache:0|1   32 requests sharing a 256-token system prompt
//   BM_StepOverhead/running:N/penalty:P   the host's share of a decode step with N sequences
//                               running, each holding a 1,024-token context: no model (items:
//                               steps); penalty 1: each with repetition_penalty 1.1 (the prompt's
//                               tokens and the output's are the sampler's per-step adjusts)
// Model: $FLASHSERVE_MODEL, else the project cache (scripts/fetch_model.sh); BM_StepOverhead uses
// only its tokenizer.
#include <benchmark/benchmark.h>

#include <random>

#include "bench/real_model.h"
#include "model/flat_batch.h"
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

// A runner with no model: forward() checks and flattens the batch as LlamaRunner does (the host's
// share of its step) and picks token 1000 wherever a token is asked for. A step of the engine on it
// costs what the scheduler, the engine and that flattening cost: the host time a GPU waits on
// between steps, which grows with the sequences running and their block tables.
class NoModelRunner : public ModelRunner {
 public:
  NoModelRunner(int32_t num_blocks, int32_t context_len) : num_blocks_(num_blocks) {
    cfg_.vocab_size = 49152;
    cfg_.context_len = context_len;
  }
  int32_t vocab_size() const override { return cfg_.vocab_size; }
  int32_t context_len() const override { return cfg_.context_len; }
  int32_t num_kv_blocks() const override { return num_blocks_; }
  int32_t block_size() const override { return kBlockSize; }
  ForwardOutput forward(const ForwardBatch& batch) override {
    ForwardOutput out;
    const FlatBatch flat = flatten(batch, kept_, cfg_, kBlockSize, num_blocks_, {0}, out);
    benchmark::DoNotOptimize(flat.slot_mapping.data());
    SampledToken picked;
    picked.token = 1000;
    out.tokens.assign(batch.samples.size(), picked);
    return out;
  }

 private:
  static constexpr int32_t kBlockSize = 16;
  ModelConfig cfg_;
  int32_t num_blocks_;
  KeptTables kept_;
};

void BM_StepOverhead(benchmark::State& state) {
  const auto running = int32_t(state.range(0));
  constexpr int32_t kContext = 1024, kMaxSteps = 4096;
  NoModelRunner runner(running * ((kContext + kMaxSteps) / 16 + 2), kContext + kMaxSteps + 16);
  EngineConfig cfg;
  cfg.scheduler.max_num_seqs = running;
  cfg.scheduler.max_num_batched_tokens = 8192;
  Engine engine(runner, real_model().tokenizer(), cfg);
  std::mt19937 rng(3);
  for (int32_t i = 0; i < running; ++i) {
    SamplingParams p = fixed_length(kMaxSteps);
    p.temperature = 1.0f;  // the sampler's per-step work included, as for most requests
    if (state.range(1) != 0) p.repetition_penalty = 1.1f;
    if (engine.submit({"r" + std::to_string(i), random_tokens(rng, kContext), p}, [](const RequestOutput&) {})) {
      std::abort();
    }
  }
  // Prefill everyone, then time decode steps only.
  while (engine.stats().num_waiting > 0) engine.step();
  engine.step();
  int64_t steps = 0;
  for (auto _ : state) {
    if (!engine.step()) std::abort();
    ++steps;
  }
  state.SetItemsProcessed(steps);
  state.counters["per_seq"] = benchmark::Counter(double(steps * running), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_StepOverhead)
    ->ArgNames({"running", "penalty"})
    ->ArgsProduct({{64, 256}, {0, 1}})
    ->Iterations(1000)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace flashserve
