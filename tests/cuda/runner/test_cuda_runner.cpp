// The GPU forward pass end to end against the CPU one: logits of tiny test models (prefill, chunked
// prefill, decode through CUDA graphs), and SmolLM2's greedy choices where they are decisive.
// Device tests skip without a GPU; the error paths run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "model/llama_runner.h"
#include "scheduler/engine.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/util/engine_harness.h"
#include "tests/util/runners.h"
#include "tests/util/test_paths.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using kernels::DType;

std::unique_ptr<Model> tiny(DType matrix_type) {
  test::TinyModelSpec spec;
  spec.dim = 256;
  spec.num_heads = 4;      // head_dim 64, which the CUDA attention kernels support
  spec.num_kv_heads = 2;
  spec.ffn_dim = 384;
  spec.num_layers = 3;
  spec.matrix_type = matrix_type;
  spec.embd_type = matrix_type;
  return test::load_tiny_model(spec, "tiny_cuda");
}

std::vector<int32_t> random_tokens(size_t n, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
  return t;
}

// A sequence's blocks, spread over the pool in reverse so paging is exercised (the tiny Llama
// models here have one KV group).
std::vector<std::vector<int32_t>> table_for(int32_t seq, int32_t blocks_per_seq, int32_t num_blocks) {
  std::vector<int32_t> t(blocks_per_seq);
  for (int32_t i = 0; i < blocks_per_seq; ++i) t[i] = num_blocks - 1 - (seq * blocks_per_seq + i);
  return {t};
}

// The same steps on two runners, whose KV caches follow the same block tables.
struct Pair {
  ModelRunner& cpu;
  ModelRunner& gpu;
};

// Largest |a - b| over every logit row of two outputs of the same batch.
double max_diff(const ForwardOutput& a, const ForwardOutput& b) {
  EXPECT_EQ(a.logits.size(), b.logits.size());
  double d = 0;
  for (size_t i = 0; i < std::min(a.logits.size(), b.logits.size()); ++i) d = std::max<double>(d, std::abs(a.logits[i] - b.logits[i]));
  return d;
}

double max_abs(const ForwardOutput& a) {
  double m = 0;
  for (float x : a.logits) m = std::max<double>(m, std::abs(x));
  return m;
}

std::unique_ptr<LlamaRunner> small_gpu(const Model& model, bool graphs, DType kv_type = DType::F16) {
  RunnerConfig c;
  c.kv_type = kv_type;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  c.record_steps = graphs;
  return test::cuda_runner(model, 256, c);
}

// Bound for logits of the tiny models (|logit| ~ 1-5): the GPU rounds K/V to f16 (2^-11 relative)
// and, above kGemvMaxTokens rows, the activations entering cuBLASLt too; the CPU keeps f32
// throughout. Both accumulate in f32, so differences stay around 1e-3 of the logits' scale (the
// emulator: 4e-5 to 1.1e-4; with an fp8 cache 8e-4, where a K or V value the two compute a hair
// apart rounds to neighbouring fp8 values).
constexpr double kTinyTolerance = 1e-2;

// Prefill, then decode through CUDA graphs, on the GPU and on the CPU with an f32 cache, or with
// the GPU's cache type where the CPU has it too (F8_E4M3: both then hold the same bytes).
void expect_gpu_matches_cpu(const Model& model, DType kv_type) {
  const auto gpu_runner = small_gpu(model, /*graphs=*/true, kv_type);
  LlamaRunner& gpu = *gpu_runner;
  const auto cpu_runner = test::cpu_runner(model, gpu.num_kv_blocks(), gpu.block_size(), false,
                                           kv_type == DType::F8_E4M3 ? kv_type : DType::F32);
  LlamaRunner& cpu = *cpu_runner;
  const int32_t vocab = model.config().vocab_size, per_seq = 8;  // 8 blocks of 16: 128 positions

  // Ragged prefill: three prompts of odd lengths, every row's logits.
  const std::vector<size_t> lengths = {37, 5, 61};
  std::vector<std::vector<int32_t>> tokens;
  ForwardBatch prefill;
  for (size_t s = 0; s < lengths.size(); ++s) {
    tokens.push_back(random_tokens(lengths[s], uint32_t(11 + s), vocab));
    prefill.seqs.push_back({0, tokens[s], table_for(int32_t(s), per_seq, gpu.num_kv_blocks()), LogitRows::All});
  }
  const ForwardOutput c0 = cpu.forward(prefill), g0 = gpu.forward(prefill);
  EXPECT_LE(max_diff(c0, g0), kTinyTolerance * std::max(1.0, max_abs(c0))) << "prefill";
  double worst = max_diff(c0, g0) / std::max(1.0, max_abs(c0));

  // Decode steps: one token per sequence (graph bucket 4 holds 3 sequences plus a padding row).
  for (int step = 0; step < 6; ++step) {
    ForwardBatch decode;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const int32_t next = int32_t((step * 31 + s * 7) % vocab);
      decode.seqs.push_back({int32_t(tokens[s].size()), {next}, table_for(int32_t(s), per_seq, gpu.num_kv_blocks()),
                             LogitRows::Last});
      tokens[s].push_back(next);
    }
    const ForwardOutput c = cpu.forward(decode), g = gpu.forward(decode);
    EXPECT_LE(max_diff(c, g), kTinyTolerance * std::max(1.0, max_abs(c))) << "decode step " << step;
    worst = std::max(worst, max_diff(c, g) / std::max(1.0, max_abs(c)));
  }
  std::printf("[ precision ] %s cache: max |gpu - cpu| / max(1, max |cpu|) = %.3g (bound %.3g)\n",
              std::string(kernels::dtype_name(kv_type)).c_str(), worst, kTinyTolerance);
}

class CudaRunnerTiny : public test::CudaTest, public ::testing::WithParamInterface<DType> {};

TEST_P(CudaRunnerTiny, PrefillThenGraphDecodeMatchCpu) { expect_gpu_matches_cpu(*tiny(GetParam()), DType::F16); }

INSTANTIATE_TEST_SUITE_P(WeightTypes, CudaRunnerTiny, ::testing::Values(DType::F32, DType::F16, DType::Q8_0, DType::Q4_1),
                         [](const auto& info) { return std::string(kernels::dtype_name(info.param)); });

using CudaRunner = test::CudaTest;

// An fp8 cache: kv_write rounds as the CPU's does, and attention reads it back exactly, so the GPU
// and the CPU twin differ only in arithmetic, as with f16.
TEST_F(CudaRunner, Fp8KvCacheMatchesTheCpuTwin) { expect_gpu_matches_cpu(*tiny(DType::Q4_1), DType::F8_E4M3); }

// A replayed graph runs the same kernels on the same data as an eager step (padding rows aside,
// which no real row reads), so the two agree to the last bit.
TEST_F(CudaRunner, GraphReplayEqualsEagerDecode) {
  const auto model = tiny(DType::Q8_0);
  const auto graphs_runner = small_gpu(*model, true), eager_runner = small_gpu(*model, false);
  LlamaRunner &graphs = *graphs_runner, &eager = *eager_runner;
  const int32_t vocab = model->config().vocab_size;
  std::vector<std::vector<int32_t>> tokens = {random_tokens(20, 1, vocab), random_tokens(3, 2, vocab)};
  ForwardBatch prefill;
  for (size_t s = 0; s < tokens.size(); ++s) prefill.seqs.push_back({0, tokens[s], table_for(int32_t(s), 4, graphs.num_kv_blocks())});
  graphs.forward(prefill);
  eager.forward(prefill);
  for (int step = 0; step < 5; ++step) {  // step 0 captures, later steps replay
    ForwardBatch decode;
    for (size_t s = 0; s < tokens.size(); ++s) {
      decode.seqs.push_back({int32_t(tokens[s].size()), {int32_t(step + 40)}, table_for(int32_t(s), 4, graphs.num_kv_blocks())});
      tokens[s].push_back(step + 40);
    }
    EXPECT_EQ(graphs.forward(decode).logits, eager.forward(decode).logits) << "step " << step;
  }
}

// A prompt prefilled in chunks reads its earlier chunks from the paged cache.
TEST_F(CudaRunner, ChunkedPrefillMatchesWhole) {
  const auto model = tiny(DType::F16);
  const auto whole_runner = small_gpu(*model, false), chunked_runner = small_gpu(*model, false);
  LlamaRunner &whole = *whole_runner, &chunked = *chunked_runner;
  const auto tokens = random_tokens(100, 5, model->config().vocab_size);
  const auto table = table_for(0, 7, whole.num_kv_blocks());
  const ForwardOutput w = whole.forward({{{0, tokens, table, LogitRows::Last}}});
  ForwardOutput c;
  for (int32_t begin = 0; begin < 100; begin += 33) {
    const int32_t end = std::min(begin + 33, 100);
    c = chunked.forward({{{begin, std::vector<int32_t>(tokens.begin() + begin, tokens.begin() + end), table,
                           end == 100 ? LogitRows::Last : LogitRows::None}}});
  }
  EXPECT_LE(max_diff(w, c), kTinyTolerance * std::max(1.0, max_abs(w)));
}

// --batch-invariant: one sequence's logits, prefilled whole and decoded alone, must equal to the bit
// the same sequence prefilled in two chunks next to other prompts and decoded among 11 others (past
// the GEMV's 8 rows, where the default mode switches to cuBLASLt), graphs on in both.
void expect_batch_invariant(DType kv_type) {
  const auto model = tiny(DType::Q8_0);
  RunnerConfig c;
  c.kv_type = kv_type;
  c.max_num_seqs = 16;
  c.max_num_batched_tokens = 256;
  c.record_steps = true;
  const auto alone_runner = test::cuda_runner(*model, 256, c, /*batch_invariant=*/true);
  const auto batch_runner = test::cuda_runner(*model, 256, c, /*batch_invariant=*/true);
  LlamaRunner &alone = *alone_runner, &batch = *batch_runner;
  const int32_t vocab = model->config().vocab_size, per_seq = 8;
  const auto prompt = random_tokens(37, 3, vocab);
  const auto row = [&](const ForwardOutput& o, int32_t seq) {
    return std::vector<float>(o.row(seq), o.row(seq) + vocab);
  };

  std::vector<std::vector<float>> want;
  want.push_back(row(alone.forward({{{0, prompt, table_for(0, per_seq, alone.num_kv_blocks())}}}), 0));

  // The sequence's first 20 tokens beside two other prompts, then its last 17 beside a third.
  ForwardBatch first, second;
  first.seqs.push_back({0, std::vector<int32_t>(prompt.begin(), prompt.begin() + 20),
                        table_for(0, per_seq, batch.num_kv_blocks()), LogitRows::None});
  second.seqs.push_back({20, std::vector<int32_t>(prompt.begin() + 20, prompt.end()),
                         table_for(0, per_seq, batch.num_kv_blocks())});
  std::vector<std::vector<int32_t>> others;
  for (int32_t s = 1; s < 12; ++s) {
    others.push_back(random_tokens(size_t(3 + 5 * s), uint32_t(100 + s), vocab));
    (s < 3 ? first : second).seqs.push_back({0, others.back(), table_for(s, per_seq, batch.num_kv_blocks())});
  }
  batch.forward(first);
  std::vector<std::vector<float>> got;
  got.push_back(row(batch.forward(second), 0));

  for (int step = 0; step < 4; ++step) {
    const int32_t next = int32_t((step * 37 + 5) % vocab);
    const int32_t pos = int32_t(prompt.size()) + step;
    want.push_back(row(alone.forward({{{pos, {next}, table_for(0, per_seq, alone.num_kv_blocks())}}}), 0));
    ForwardBatch decode;
    decode.seqs.push_back({pos, {next}, table_for(0, per_seq, batch.num_kv_blocks())});
    for (int32_t s = 1; s < 12; ++s) {
      auto& t = others[size_t(s - 1)];
      decode.seqs.push_back({int32_t(t.size()), {int32_t(s + step)}, table_for(s, per_seq, batch.num_kv_blocks())});
      t.push_back(s + step);
    }
    got.push_back(row(batch.forward(decode), 0));
  }
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got[i], want[i]) << (i == 0 ? std::string("prefill") : "decode step " + std::to_string(i));
}

TEST_F(CudaRunner, BatchInvariantModeGivesASequenceTheSameBitsAloneAndInABatch) {
  expect_batch_invariant(DType::F16);
}

// An fp8 cache rounds each value alone, so it keeps the invariance.
TEST_F(CudaRunner, BatchInvariantModeHoldsWithAnFp8Cache) { expect_batch_invariant(DType::F8_E4M3); }

// Speculative decoding under --batch-invariant: a sequence's rows give the same bits whether it
// verifies drafts or decodes one token a step, so greedy tokens and their logprobs are those of
// speculation off, as on the CPU (tests/scheduler/test_speculative_decoding.cpp). On a GPU this is
// the invariance claim; on the emulator, whose GEMM rounds once per sum, both modes give the same
// bits anyway, so there it checks the runner's verification path (several rows of one sequence,
// each sampled on the device with its own step).
TEST_F(CudaRunner, BatchInvariantSpeculationKeepsTheTokens) {
  const auto model = tiny(DType::Q8_0);
  RunnerConfig c;
  c.kv_type = DType::F16;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 64;
  c.record_steps = true;
  const auto runner = test::cuda_runner(*model, 128, c, /*batch_invariant=*/true);
  const auto tok = test::tiny_tokenizer();
  std::vector<test::Job> jobs;
  // Prompts repeating a phrase; the random model soon repeats itself too, and prompt lookup drafts
  // from both. (Its drafts are all kept: rejection and rollback are the CPU tests' to check, on a
  // runner path this one shares.)
  for (int i = 0; i < 8; ++i) {
    test::Job j;
    const std::vector<int32_t> phrase = random_tokens(size_t(2 + i % 4), uint32_t(70 + i), 200);
    for (int r = 0; r < 3; ++r) j.prompt.insert(j.prompt.end(), phrase.begin(), phrase.end());
    j.params = test::greedy(40);
    j.params.logprobs = 2;
    jobs.push_back(std::move(j));
  }
  EngineConfig off;
  off.scheduler.max_num_seqs = 8;
  off.scheduler.max_num_batched_tokens = 64;
  EngineConfig on = off;
  on.scheduler.speculative.method = SpeculativeMethod::Ngram;
  on.scheduler.speculative.num_speculative_tokens = 4;
  on.scheduler.speculative.min_acceptance = 0.01;  // pinned, so the drafts do not depend on measured step times
  const test::RunStats want = test::run_jobs(*runner, *tok, off, jobs), got = test::run_jobs(*runner, *tok, on, jobs);
  const SpeculationStats& spec = got.engine.speculation;
  std::printf("[ speculation ] %lld draft tokens, %lld accepted\n", (long long)spec.num_draft_tokens,
              (long long)spec.num_accepted_tokens);
  EXPECT_GT(spec.num_accepted_tokens, 0) << "no draft was kept: the rows after the first were never used";
  ASSERT_EQ(got.results.size(), want.results.size());
  for (size_t i = 0; i < want.results.size(); ++i) {
    EXPECT_EQ(got.results[i].tokens, want.results[i].tokens) << "job " << i;
    ASSERT_EQ(got.results[i].sampled.size(), want.results[i].sampled.size()) << "job " << i;
    for (size_t t = 0; t < want.results[i].sampled.size(); ++t) {
      EXPECT_EQ(got.results[i].sampled[t].logprob, want.results[i].sampled[t].logprob) << "job " << i << " token " << t;
    }
  }
}

TEST_F(CudaRunner, RejectsMalformedBatchesLikeTheCpu) {
  const auto model = tiny(DType::F32);
  const auto gpu_runner = small_gpu(*model, true);
  LlamaRunner& gpu = *gpu_runner;
  EXPECT_THROW(gpu.forward({}), std::invalid_argument);
  EXPECT_THROW(gpu.forward({{{0, {model->config().vocab_size}, {{0}}}}}), std::invalid_argument);
  EXPECT_THROW(gpu.forward({{{0, {1, 2}, {{gpu.num_kv_blocks()}}}}}), std::invalid_argument);
}

// SmolLM2 teacher-forced on the CPU's greedy continuation of the foundation issue's prompts: the
// GPU's top-1 must equal the CPU's wherever the CPU's top-1/top-2 gap exceeds 0.1.
TEST_F(CudaRunner, SmolLM2GreedyMatchesCpuWhereDecisive) {
  const auto model = Model::load(test::real_model_path());
  std::ifstream f(test::fixture_path("smollm2_llamacpp.json"));
  const auto fixture = nlohmann::json::parse(f);
  const auto gpu_runner = test::cuda_runner(*model, 256), cpu_runner = test::cpu_runner(*model, 256);
  LlamaRunner &gpu = *gpu_runner, &cpu = *cpu_runner;
  int decisive = 0, agree = 0;
  for (const auto& p : fixture["prompts"]) {
    auto tokens = p["prompt_ids"].get<std::vector<int32_t>>();
    const auto generated = p["generated_ids"].get<std::vector<int32_t>>();
    const size_t first = tokens.size() - 1;
    tokens.insert(tokens.end(), generated.begin(), generated.end() - 1);
    std::vector<int32_t> table((tokens.size() + 15) / 16);
    std::iota(table.begin(), table.end(), 0);
    const ForwardBatch b{{{0, tokens, {table}, LogitRows::All}}};
    const ForwardOutput c = cpu.forward(b), g = gpu.forward(b);
    for (size_t i = first; i < tokens.size(); ++i) {
      const float* cr = c.row(0, int32_t(i));
      const float* gr = g.row(0, int32_t(i));
      std::vector<int32_t> order(c.vocab_size);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 2, order.end(), [&](int32_t a, int32_t z) { return cr[a] > cr[z]; });
      if (cr[order[0]] - cr[order[1]] <= 0.1f) continue;
      ++decisive;
      const int32_t gpu_top = int32_t(std::max_element(gr, gr + g.vocab_size) - gr);
      agree += gpu_top == order[0];
      EXPECT_EQ(gpu_top, order[0]) << "position " << i;
    }
  }
  std::printf("[ agreement ] GPU top-1 equals CPU top-1 at %d/%d decisive positions\n", agree, decisive);
  EXPECT_GT(decisive, 100);
}

// Runs without a GPU too: asking for the GPU where there is none is a clear error, not a crash.
TEST(CudaRunnerWithoutDevice, ConstructorSaysWhatIsMissing) {
  if (kernels::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  const auto model = tiny(DType::F32);
  try {
    small_gpu(*model, true);
    FAIL() << "constructed without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST_F(CudaRunner, RejectsUnsupportedHeadDim) {
  test::TinyModelSpec spec;  // dim 64 over 4 heads: head_dim 16
  const auto model = test::load_tiny_model(spec, "tiny_hd16");
  try {
    small_gpu(*model, true);
    FAIL() << "constructed a CUDA runner for head dim 16";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("attention"), std::string::npos) << e.what();
  }
}

// A 40-token prefill (every row's logits) and one decode step on the GPU, each against the CPU.
void expect_prefill_and_decode_match_cpu(const Model& model, uint32_t seed) {
  const auto gpu = small_gpu(model, true);
  const auto cpu = test::cpu_runner(model, gpu->num_kv_blocks());
  const auto tokens = random_tokens(40, seed, model.config().vocab_size);
  const ForwardBatch prefill{{{0, tokens, table_for(0, 4, gpu->num_kv_blocks()), LogitRows::All}}};
  const ForwardOutput c = cpu->forward(prefill), g = gpu->forward(prefill);
  EXPECT_LE(max_diff(c, g), kTinyTolerance * std::max(1.0, max_abs(c))) << "prefill";
  const ForwardBatch decode{{{40, {7}, table_for(0, 4, gpu->num_kv_blocks()), LogitRows::Last}}};
  const ForwardOutput cd = cpu->forward(decode), gd = gpu->forward(decode);
  EXPECT_LE(max_diff(cd, gd), kTinyTolerance * std::max(1.0, max_abs(cd))) << "decode";
}

// The one layer sequence runs a mixture of experts on the GPU too (steps are not recorded: the
// expert grouping is read back mid-step).
TEST_F(CudaRunner, MixtureOfExpertsMatchesCpu) {
  test::TinyModelSpec spec;
  spec.dim = 128;
  spec.num_heads = 2;  // head_dim 64
  spec.num_kv_heads = 2;
  spec.num_experts = 4;
  spec.experts_used = 2;
  expect_prefill_and_decode_match_cpu(*test::load_tiny_model(spec, "tiny_moe"), 9);
}

// Gemma 3 on the GPU: head dim 256, GeGLU, pre- and post-norms, per-head Q/K norms, a scaled
// embedding, and five sliding-window layers to one global (six KV groups, one table each).
TEST_F(CudaRunner, Gemma3WithHeadDim256MatchesCpu) {
  test::TinyModelSpec spec;
  spec.arch = "gemma3";
  spec.num_layers = 6;
  spec.dim = 512;
  spec.num_heads = 2;  // head_dim 256
  spec.num_kv_heads = 1;
  spec.ffn_dim = 256;
  spec.sliding_window = 8;
  const auto model = test::load_tiny_model(spec, "tiny_gemma3_hd256");
  const auto gpu = small_gpu(*model, true);
  const auto windows = gpu->kv_group_windows();
  ASSERT_EQ(windows.size(), 6u);
  ASSERT_EQ(std::count(windows.begin(), windows.end(), 0), 1);
  const auto cpu = test::cpu_runner(*model, gpu->num_kv_blocks() / int32_t(windows.size()));
  const auto tables = test::per_group(*gpu, {5, 3, 9, 1});
  auto tokens = random_tokens(40, 21, model->config().vocab_size);
  const ForwardBatch prefill{{{0, tokens, tables, LogitRows::All}}};
  const ForwardOutput c = cpu->forward(prefill), g = gpu->forward(prefill);
  EXPECT_LE(max_diff(c, g), kTinyTolerance * std::max(1.0, max_abs(c))) << "prefill";
  for (int step = 0; step < 3; ++step) {
    const int32_t next = 17 + step;
    const ForwardBatch decode{{{int32_t(tokens.size()), {next}, tables, LogitRows::Last}}};
    tokens.push_back(next);
    const ForwardOutput cd = cpu->forward(decode), gd = gpu->forward(decode);
    EXPECT_LE(max_diff(cd, gd), kTinyTolerance * std::max(1.0, max_abs(cd))) << "decode step " << step;
  }
}

// Granite on the GPU: its embedding, residual, attention and logit multipliers as on the CPU.
TEST_F(CudaRunner, GraniteMatchesCpu) {
  test::TinyModelSpec spec;
  spec.arch = "granite";
  spec.dim = 128;
  spec.num_heads = 2;  // head_dim 64
  expect_prefill_and_decode_match_cpu(*test::load_tiny_model(spec, "tiny_granite"), 23);
}

// Greedy sampling on the GPU picks the CPU's token wherever the CPU's choice is decisive.
TEST_F(CudaRunner, SamplesOnTheDeviceLikeTheCpu) {
  const auto model = tiny(DType::Q8_0);
  const auto gpu = small_gpu(*model, true);
  const auto cpu = test::cpu_runner(*model, gpu->num_kv_blocks());
  ForwardBatch b;
  for (int32_t s = 0; s < 3; ++s) {
    b.seqs.push_back({0, random_tokens(size_t(9 + s), uint32_t(s), model->config().vocab_size),
                      table_for(s, 2, gpu->num_kv_blocks()), LogitRows::Last, s});
    SamplingStep step;
    step.row.temperature = 0.0f;
    step.logprobs = 2;  // the CPU's top two tell whether its choice is decisive
    b.samples.push_back(step);
  }
  // Constrained decoding: the masks go up with the sampling rows, one allowing a single token and
  // one allowing three.
  const std::vector<std::vector<int32_t>> allowed = {{41}, {5, 17, 40}};
  for (int32_t s = 3; s < 5; ++s) {
    b.seqs.push_back({0, random_tokens(7, uint32_t(s), model->config().vocab_size),
                      table_for(s, 2, gpu->num_kv_blocks()), LogitRows::Last, s});
    SamplingStep step;
    step.row.temperature = 0.0f;
    step.mask.assign(size_t(kernels::mask_words(model->config().vocab_size)), 0);
    for (int32_t id : allowed[size_t(s - 3)]) step.mask[size_t(id / 32)] |= uint32_t(1) << (id % 32);
    b.samples.push_back(step);
  }
  const ForwardOutput c = cpu->forward(b), g = gpu->forward(b);
  EXPECT_EQ(g.tokens[3].token, 41);
  EXPECT_NE(std::find(allowed[1].begin(), allowed[1].end(), g.tokens[4].token), allowed[1].end())
      << "token " << g.tokens[4].token;
  for (int32_t s = 0; s < 3; ++s) {
    const auto& top = c.tokens[s].top_logprobs;
    ASSERT_EQ(top.size(), 2u);
    EXPECT_EQ(c.tokens[s].token, top[0].first);
    EXPECT_NEAR(g.tokens[s].logprob, c.tokens[s].logprob, 1e-2);
    if (top[0].second - top[1].second > 0.05f) {
      EXPECT_EQ(g.tokens[s].token, c.tokens[s].token) << "sequence " << s;
    }
  }
}

}  // namespace
}  // namespace flashserve
