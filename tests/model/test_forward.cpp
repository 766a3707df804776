// The engine's forward pass on tiny random models: agreement with the f64 reference (and, for
// Granite, with llama.cpp's logits of the same file), and the invariances the scheduler relies on (paging, batching and chunking never change a logit bit).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "model/model.h"
#include "tests/util/reference_llama.h"
#include "tests/util/runners.h"
#include "tests/util/test_paths.h"
#include "tests/util/tiny_model.h"

namespace flashserve {
namespace {

using kernels::DType;
using Logits = std::vector<std::vector<float>>;  // [position][vocab]

std::unique_ptr<Model> tiny(const test::TinyModelSpec& spec) { return test::load_tiny_model(spec, "tiny"); }

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % test::kTinyVocab);
  return t;
}

std::vector<int32_t> blocks(int first, int n) {
  std::vector<int32_t> b(n);
  std::iota(b.begin(), b.end(), first);
  return b;
}

SequenceInput seq_input(const std::vector<int32_t>& tokens, int begin, int end, std::vector<int32_t> table) {
  SequenceInput s;
  s.num_computed_tokens = begin;
  s.token_ids.assign(tokens.begin() + begin, tokens.begin() + end);
  s.block_tables = {std::move(table)};
  s.logits = LogitRows::All;
  return s;
}

Logits rows_of(const ForwardOutput& out, int32_t seq) {
  Logits r;
  for (int32_t i = 0; i < out.num_rows[seq]; ++i) r.emplace_back(out.row(seq, i), out.row(seq, i) + out.vocab_size);
  return r;
}

// Prefills `tokens` in chunks of `chunk` tokens, collecting logits for every position.
Logits prefill(ModelRunner& cache, const std::vector<int32_t>& tokens, const std::vector<int32_t>& table,
               int chunk) {
  Logits all;
  for (int begin = 0; begin < int(tokens.size()); begin += chunk) {
    const int end = std::min<int>(begin + chunk, tokens.size());
    ForwardBatch b{{seq_input(tokens, begin, end, table)}};
    b.seqs[0].block_tables = test::per_group(cache, table);
    for (auto& row : rows_of(cache.forward(b), 0)) all.push_back(std::move(row));
  }
  return all;
}

// Every position's logits of a whole-prompt prefill against the plain f64 forward pass.
void expect_prefill_matches_reference(const Model& m, const std::vector<int32_t>& tokens) {
  auto cache = test::cpu_runner(m, 8, 16);
  const Logits got = prefill(*cache, tokens, blocks(0, 3), int(tokens.size()));
  const auto want = test::reference_logits(m.file(), tokens);
  ASSERT_EQ(got.size(), want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    EXPECT_LT(test::relative_error(got[p].data(), want[p]), 1e-4) << "position " << p;
  }
}

struct TypeCase {
  DType matrix, embd;
  bool tied;
};

class ForwardVsReference : public ::testing::TestWithParam<TypeCase> {};

TEST_P(ForwardVsReference, LogitsMatchF64Reference) {
  test::TinyModelSpec spec;
  spec.matrix_type = GetParam().matrix;
  spec.embd_type = GetParam().embd;
  spec.tied_embeddings = GetParam().tied;
  spec.seed = 7;
  expect_prefill_matches_reference(*tiny(spec), random_tokens(37, 3));
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, ForwardVsReference,
                         ::testing::Values(TypeCase{DType::F32, DType::F32, true}, TypeCase{DType::F16, DType::F16, false},
                                           TypeCase{DType::BF16, DType::F32, true}, TypeCase{DType::Q8_0, DType::Q8_0, true},
                                           TypeCase{DType::Q4_0, DType::Q8_0, false},
                                           TypeCase{DType::Q4_1, DType::Q8_0, true}));

// Every weight format the CPU decodes, through the whole forward pass. K-quants and IQ4_XS pack
// 256-element super-blocks, so every matrix here has rows of 256 or 512.
class FormatVsReference : public ::testing::TestWithParam<DType> {};

TEST_P(FormatVsReference, LogitsMatchF64Reference) {
  test::TinyModelSpec spec;
  spec.dim = 256;
  spec.ffn_dim = 512;
  spec.num_heads = 4;
  spec.matrix_type = GetParam();
  spec.embd_type = GetParam();
  spec.tied_embeddings = false;  // the LM head in the format too, the embedding through get_rows
  spec.seed = 11;
  expect_prefill_matches_reference(*tiny(spec), random_tokens(21, 5));
}

INSTANTIATE_TEST_SUITE_P(Formats, FormatVsReference,
                         ::testing::Values(DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                                           DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::IQ4_XS),
                         [](const auto& info) { return std::string(kernels::dtype_name(info.param)); });

// The same layer sequence with each architecture's additions: Qwen2's Q/K/V biases; Qwen3's
// per-head Q/K norms; Gemma 3's too, with GeGLU, post-branch norms, scaled embeddings and five
// sliding-window layers (window 8, so a 37-token prompt reaches past it) to each global one;
// Granite's four multipliers (embeddings, each branch, the attention scores, the logits); all but
// Llama and Granite with neox RoPE. A missed bias, norm, window, multiplier or RoPE layout moves
// logits far past the bound.
class ArchitectureVsReference : public ::testing::TestWithParam<std::string> {
 protected:
  static test::TinyModelSpec spec_for(const std::string& arch) {
    test::TinyModelSpec spec;
    spec.arch = arch;
    if (arch == "gemma3") spec.num_layers = 6;  // layers 0-4 local, 5 global
    return spec;
  }
};

TEST_P(ArchitectureVsReference, LogitsMatchF64Reference) {
  test::TinyModelSpec spec = spec_for(GetParam());
  spec.matrix_type = DType::Q8_0;
  spec.seed = 13;
  const auto m = tiny(spec);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, GetParam());
  EXPECT_EQ(c.rope_neox, GetParam() != "llama" && GetParam() != "granite");
  EXPECT_EQ(m->layers()[0].bq.empty(), GetParam() != "qwen2");
  EXPECT_EQ(m->layers()[0].q_norm.empty(), GetParam() != "qwen3" && GetParam() != "gemma3");
  if (GetParam() == "gemma3") {
    EXPECT_TRUE(c.is_local_layer(0) && c.is_local_layer(4) && !c.is_local_layer(5));
    EXPECT_TRUE(c.geglu);
    EXPECT_FLOAT_EQ(c.embed_scale, 8.0f);  // sqrt(64)
  }
  if (GetParam() == "granite") {
    EXPECT_FLOAT_EQ(c.embed_scale, 3.0f);
    EXPECT_FLOAT_EQ(c.residual_scale, 0.5f);
    EXPECT_FLOAT_EQ(c.attention_scale, 0.2f);
    EXPECT_FLOAT_EQ(c.logit_multiplier, 0.25f);
  }
  expect_prefill_matches_reference(*m, random_tokens(37, 6));
}

// Chunking and batching change no bit with the extra ops either.
TEST_P(ArchitectureVsReference, ChunkedPrefillMatchesWhole) {
  const auto m = tiny(spec_for(GetParam()));
  const auto tokens = random_tokens(45, 14);
  auto a = test::cpu_runner(*m, 4), b = test::cpu_runner(*m, 4);
  EXPECT_EQ(prefill(*a, tokens, blocks(0, 3), 45), prefill(*b, tokens, blocks(0, 3), 8));
}

INSTANTIATE_TEST_SUITE_P(Architectures, ArchitectureVsReference, ::testing::Values("llama", "qwen2", "qwen3", "gemma3", "granite"),
                         [](const auto& info) { return info.param; });

// The tiny Granite file as llama.cpp runs it (tests/fixtures/tiny_granite_llamacpp.json, its top
// five logits at four positions): the multipliers read and applied as the anchor does. Its f16 KV
// cache moves its logits by about 1e-4.
TEST(GraniteAgainstLlamaCpp, TopLogitsMatch) {
  test::TinyModelSpec spec;
  spec.arch = "granite";
  const auto m = tiny(spec);
  std::ifstream in(test::fixture_path("tiny_granite_llamacpp.json"));
  const auto fixture = nlohmann::json::parse(in)["prompts"][0];
  std::vector<int32_t> ids = fixture["prompt_ids"].get<std::vector<int32_t>>();
  const auto generated = fixture["generated_ids"].get<std::vector<int32_t>>();
  const size_t first = ids.size() - 1;
  ids.insert(ids.end(), generated.begin(), generated.end() - 1);
  auto cache = test::cpu_runner(*m, 8, 16);
  const Logits got = prefill(*cache, ids, blocks(0, 3), int(ids.size()));
  const auto& top = fixture["top_logits"];
  ASSERT_EQ(top.size(), generated.size());
  for (size_t i = 0; i < top.size(); ++i) {
    const std::vector<float>& row = got[first + i];
    EXPECT_EQ(std::max_element(row.begin(), row.end()) - row.begin(), top[i][0][0].get<int>()) << "position " << i;
    for (const auto& pair : top[i]) EXPECT_NEAR(row[pair[0].get<int>()], pair[1].get<double>(), 1e-3) << "position " << i;
  }
}

// Gemma 3's local layers form their own KV groups: a decode step whose windowed groups have
// returned every block before the window (-1) gives the same logits as one with whole tables; a
// missing block the step can see is refused.
TEST(SlidingWindowGroups, BlocksBeforeTheWindowAreNeverRead) {
  test::TinyModelSpec spec;
  spec.arch = "gemma3";
  spec.num_layers = 6;
  const auto m = tiny(spec);
  const auto tokens = random_tokens(38, 17);
  auto runner = test::cpu_runner(*m, 10, 4);
  ASSERT_EQ(runner->kv_group_windows(), (std::vector<int32_t>{0, 8, 8, 8, 8, 8}));
  SequenceInput head = seq_input(tokens, 0, 37, blocks(0, 10));
  head.block_tables = test::per_group(*runner, blocks(0, 10));
  head.logits = LogitRows::None;
  runner->forward(ForwardBatch{{head}});

  SequenceInput step = seq_input(tokens, 37, 38, blocks(0, 10));
  step.block_tables = test::per_group(*runner, blocks(0, 10));
  const Logits whole = rows_of(runner->forward(ForwardBatch{{step}}), 0);
  for (size_t g = 1; g < 6; ++g) std::fill_n(step.block_tables[g].begin(), 7, -1);  // position 37 sees 30..37
  EXPECT_EQ(rows_of(runner->forward(ForwardBatch{{step}}), 0), whole);

  step.block_tables[1][7] = -1;
  EXPECT_THROW(runner->forward(ForwardBatch{{step}}), std::invalid_argument);
  step.block_tables[1][7] = step.block_tables[2][7] - 10;
  step.block_tables[0][0] = -1;  // the global layer sees everything
  EXPECT_THROW(runner->forward(ForwardBatch{{step}}), std::invalid_argument);
}

// A Llama file with attention.sliding_window (Mistral 7B v0.1): every layer windowed, one KV group,
// the model's own RoPE.
TEST(SlidingWindowGroups, MistralStyleLlamaMatchesReference) {
  test::TinyModelSpec spec;
  spec.windowed_llama = true;
  spec.matrix_type = DType::Q8_0;
  spec.seed = 19;
  const auto m = tiny(spec);
  EXPECT_EQ(m->config().sliding_window, 8);
  EXPECT_TRUE(m->config().is_local_layer(0) && m->config().is_local_layer(1));
  EXPECT_EQ(test::cpu_runner(*m, 1)->kv_group_windows(), std::vector<int32_t>{8});
  expect_prefill_matches_reference(*m, random_tokens(37, 8));
}

// Loading spec's file (written at a fresh path from stem) fails with a GgufError holding fragment.
void expect_load_error(const test::TinyModelSpec& spec, const std::string& stem, const std::string& fragment) {
  const std::string path = test::temp_model_path(stem);
  test::write_tiny_model(path, spec);
  try {
    Model::load(path);
    ADD_FAILURE() << "loaded " << stem << " (" << spec.arch << ")";
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ModelLoad, UnsupportedArchitectureIsNamed) {
  test::TinyModelSpec spec;
  spec.arch = "gemma2";
  expect_load_error(spec, "gemma2", "unsupported architecture 'gemma2'");
}

struct MoeCase {
  int32_t experts, used;
  DType matrix;
};

class MoeForwardVsReference : public ::testing::TestWithParam<MoeCase> {};

// Routing has to agree with the f64 reference too: a token sent to another expert, a dropped
// renormalisation or a result summed into the wrong token moves the logits far past the bound.
TEST_P(MoeForwardVsReference, LogitsMatchF64Reference) {
  test::TinyModelSpec spec;
  spec.num_experts = GetParam().experts;
  spec.experts_used = GetParam().used;
  spec.matrix_type = GetParam().matrix;
  spec.embd_type = DType::Q8_0;
  spec.seed = 9;
  auto m = tiny(spec);
  ASSERT_TRUE(m->config().is_moe());
  expect_prefill_matches_reference(*m, random_tokens(37, 4));
}

INSTANTIATE_TEST_SUITE_P(ExpertsAndWeightTypes, MoeForwardVsReference,
                         ::testing::Values(MoeCase{8, 2, DType::F32}, MoeCase{4, 1, DType::F32},
                                           MoeCase{8, 2, DType::Q8_0}, MoeCase{4, 1, DType::Q4_1},
                                           MoeCase{8, 2, DType::Q4_1}),
                         [](const ::testing::TestParamInfo<MoeCase>& info) {
                           const MoeCase& c = info.param;
                           return std::to_string(c.experts) + "ExpertsTop" + std::to_string(c.used) + "_" +
                                  std::string(kernels::dtype_name(c.matrix));
                         });

struct FfnCase {
  int32_t experts, used;  // 0, 0: dense
  bool q8 = false;        // 8-bit activations and integer dots (the CPU's fast path)
  DType matrix = DType::Q4_1;
  DType kv = DType::F32;  // the KV cache's type
};

// Every invariance holds for dense and mixture-of-experts models alike: MoE regroups rows by
// expert, so a token's expert batch differs between batched, alone and chunked runs.
class ForwardInvariance : public ::testing::TestWithParam<FfnCase> {
 protected:
  void SetUp() override {
    test::TinyModelSpec spec;
    spec.matrix_type = GetParam().matrix;
    if (kernels::block_elems(spec.matrix_type) == 256) {  // super-blocks need rows of whole 256s
      spec.dim = 256;
      spec.ffn_dim = 512;
    }
    if (GetParam().kv == DType::Q8_0) spec.dim = 128;  // head_dim 32: whole q8_0 blocks
    spec.embd_type = DType::Q8_0;
    spec.num_experts = GetParam().experts;
    spec.experts_used = GetParam().used;
    model_ = tiny(spec);
  }
  std::unique_ptr<LlamaRunner> runner(int32_t num_blocks, int32_t block_size) const {
    return test::cpu_runner(*model_, num_blocks, block_size, GetParam().q8, GetParam().kv);
  }
  std::unique_ptr<Model> model_;
};

INSTANTIATE_TEST_SUITE_P(Ffn, ForwardInvariance,
                         ::testing::Values(FfnCase{0, 0}, FfnCase{8, 2}, FfnCase{4, 1}, FfnCase{0, 0, true},
                                           FfnCase{8, 2, true}, FfnCase{0, 0, true, DType::Q4_K},
                                           FfnCase{0, 0, true, DType::Q6_K}, FfnCase{0, 0, true, DType::Q4_1, DType::Q8_0},
                                           FfnCase{8, 2, false, DType::Q4_1, DType::Q8_0},
                                           FfnCase{0, 0, true, DType::Q4_1, DType::F8_E4M3}),
                         [](const ::testing::TestParamInfo<FfnCase>& info) {
                           const FfnCase& c = info.param;
                           return (c.experts == 0 ? std::string("Dense")
                                                  : "Moe" + std::to_string(c.experts) + "Top" + std::to_string(c.used)) +
                                  (c.q8 ? "Q8Activations" : "") +
                                  (c.matrix == DType::Q4_1 ? "" : std::string(kernels::dtype_name(c.matrix))) +
                                  (c.kv == DType::F32 ? "" : "Kv" + std::string(kernels::dtype_name(c.kv)));
                         });

TEST_P(ForwardInvariance, ShuffledBlockTableMatchesContiguous) {
  const auto tokens = random_tokens(70, 11);
  auto a = runner(16, 16);
  auto b = runner(16, 16);
  std::vector<int32_t> shuffled = blocks(0, 16);
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(5));
  shuffled.resize(5);
  EXPECT_EQ(prefill(*a, tokens, blocks(0, 5), 70), prefill(*b, tokens, shuffled, 70));
}

TEST_P(ForwardInvariance, ChunkedPrefillMatchesWhole) {
  const auto tokens = random_tokens(53, 12);
  auto a = runner(4, 16);
  auto b = runner(4, 16);
  auto c = runner(4, 16);
  const Logits whole = prefill(*a, tokens, blocks(0, 4), 53);
  EXPECT_EQ(whole, prefill(*b, tokens, blocks(0, 4), 7));
  EXPECT_EQ(whole, prefill(*c, tokens, blocks(0, 4), 1));  // token-by-token decode
}

TEST_P(ForwardInvariance, BatchedSequencesMatchEachAlone) {
  const std::vector<std::vector<int32_t>> prompts = {random_tokens(5, 1), random_tokens(33, 2), random_tokens(1, 3),
                                                     random_tokens(17, 4)};
  auto batched = runner(32, 16);
  ForwardBatch b;
  for (size_t i = 0; i < prompts.size(); ++i) {
    b.seqs.push_back(seq_input(prompts[i], 0, prompts[i].size(), blocks(8 * i, 3)));
  }
  const ForwardOutput out = batched->forward(b);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = runner(3, 16);
    EXPECT_EQ(rows_of(out, i), prefill(*alone, prompts[i], blocks(0, 3), prompts[i].size())) << "seq " << i;
  }
}

TEST_P(ForwardInvariance, MixedPrefillAndDecodeBatchMatchesAlone) {
  const auto long_prompt = random_tokens(40, 21), short_prompt = random_tokens(9, 22);
  auto cache = runner(16, 16);
  prefill(*cache, short_prompt, blocks(0, 1), 8);  // short one has 8 tokens cached
  ForwardBatch b{{seq_input(short_prompt, 8, 9, blocks(0, 1)), seq_input(long_prompt, 0, 40, blocks(4, 3))}};
  const ForwardOutput out = cache->forward(b);

  auto alone = runner(4, 16);
  EXPECT_EQ(rows_of(out, 0).back(), prefill(*alone, short_prompt, blocks(0, 1), 9).back());
  auto alone2 = runner(4, 16);
  EXPECT_EQ(rows_of(out, 1), prefill(*alone2, long_prompt, blocks(0, 3), 40));
}

TEST_P(ForwardInvariance, LastTokenLogitsOnlyByDefault) {
  const auto tokens = random_tokens(10, 31);
  auto cache = runner(2, 16);
  SequenceInput s = seq_input(tokens, 0, 10, blocks(0, 1));
  s.logits = LogitRows::Last;
  const ForwardOutput out = cache->forward(ForwardBatch{{s}});
  ASSERT_EQ(out.num_rows[0], 1);
  auto again = runner(2, 16);
  EXPECT_EQ(rows_of(out, 0).back(), prefill(*again, tokens, blocks(0, 1), 10).back());
}

TEST_P(ForwardInvariance, ChunkWithoutLogitsStillFillsTheCache) {
  const auto tokens = random_tokens(30, 41);
  auto a = runner(2, 16);
  auto b = runner(2, 16);
  SequenceInput head = seq_input(tokens, 0, 20, blocks(0, 2));
  head.logits = LogitRows::None;
  const ForwardOutput none = a->forward(ForwardBatch{{head}});
  EXPECT_EQ(none.num_rows[0], 0);
  EXPECT_TRUE(none.logits.empty());
  const ForwardOutput tail = a->forward(ForwardBatch{{seq_input(tokens, 20, 30, blocks(0, 2))}});
  const Logits whole = prefill(*b, tokens, blocks(0, 2), 30);
  EXPECT_EQ(rows_of(tail, 0), Logits(whole.begin() + 20, whole.end()));
}

// The engine's sequences: the runner keeps their tables and each step carries only the blocks
// added since the last one. The logits equal those of the same steps sent with whole tables.
TEST_P(ForwardInvariance, KeptTablesMatchWholeTables) {
  struct Seq {
    std::vector<int32_t> tokens, table;
    int64_t id;
    size_t sent = 0;  // blocks the kept runner holds
  };
  std::vector<Seq> seqs = {{random_tokens(45, 51), blocks(0, 3), 7}, {random_tokens(23, 52), blocks(8, 2), 9}};
  auto kept = runner(16, 16);
  auto whole = runner(16, 16);
  for (int begin = 0; begin < 45; begin += 7) {  // a block arrives every few steps
    ForwardBatch by_delta, by_whole;
    for (Seq& q : seqs) {
      if (begin >= int(q.tokens.size())) continue;
      const int end = std::min<int>(begin + 7, q.tokens.size());
      const size_t need = size_t(end + 15) / 16;
      by_whole.seqs.push_back(seq_input(q.tokens, begin, end, std::vector<int32_t>(q.table.begin(), q.table.begin() + need)));
      by_delta.seqs.push_back(seq_input(q.tokens, begin, end, std::vector<int32_t>(q.table.begin() + q.sent, q.table.begin() + need)));
      if (need == q.sent) by_delta.seqs.back().block_tables.clear();  // nothing new
      by_delta.seqs.back().kept_id = q.id;
      q.sent = need;
    }
    const ForwardOutput got = kept->forward(by_delta), want = whole->forward(by_whole);
    for (size_t i = 0; i < by_delta.seqs.size(); ++i) EXPECT_EQ(rows_of(got, i), rows_of(want, i)) << "step at " << begin;
  }

  auto expect_rejected = [&](const ForwardBatch& b, const std::string& fragment) {
    try {
      kept->forward(b);
      ADD_FAILURE() << "accepted a batch that should fail with '" << fragment << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  SequenceInput next = seq_input(seqs[0].tokens, 44, 45, {});
  next.block_tables.clear();
  next.kept_id = 7;
  expect_rejected(ForwardBatch{{next, next}}, "appears twice");
  // A release applies even when the rest of the batch is refused: id 7 starts over, empty.
  expect_rejected(ForwardBatch{{}, {}, {7}}, "empty");
  expect_rejected(ForwardBatch{{next}}, "cannot hold");
  next.kept_id = 11;
  next.block_tables = {{99}};
  expect_rejected(ForwardBatch{{next}}, "out of range");
}

TEST_P(ForwardInvariance, MalformedBatchesAreRejected) {
  auto cache = runner(2, 16);
  auto expect_rejected = [&](SequenceInput s, const std::string& fragment) {
    try {
      cache->forward(ForwardBatch{{s}});
      ADD_FAILURE() << "accepted a batch that should fail with '" << fragment << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  expect_rejected(seq_input({1, 2, 3}, 0, 3, {}), "block table");
  expect_rejected(seq_input({1, 2, 3}, 0, 3, {7}), "out of range");
  expect_rejected(seq_input({1, test::kTinyVocab}, 0, 2, {0}), "token id");
  expect_rejected(SequenceInput{0, {}, {{0}}, LogitRows::Last}, "no new tokens");
  SequenceInput past_context = seq_input({1}, 0, 1, blocks(0, 2));
  past_context.num_computed_tokens = 512;
  expect_rejected(past_context, "context window");
  EXPECT_THROW(cache->forward(ForwardBatch{}), std::invalid_argument);
}

TEST(ModelLoad, MissingTensorIsNamed) {
  test::TinyModelSpec spec;
  spec.omit_tensor = "blk.1.ffn_up.weight";
  expect_load_error(spec, "missing", "blk.1.ffn_up.weight");
}

TEST(ModelLoad, MissingExpertTensorIsNamed) {
  test::TinyModelSpec spec;
  spec.num_experts = 4;
  spec.experts_used = 2;
  spec.omit_tensor = "blk.1.ffn_down_exps.weight";
  expect_load_error(spec, "missing_experts", "blk.1.ffn_down_exps.weight");
}

// A family's tensors come with it: a Llama file carrying Qwen3's per-head norms is refused by
// name (running it without them would be another model), and a Qwen3 file without them too.
TEST(ModelLoad, TensorOutsideTheFamilyIsRefused) {
  test::TinyModelSpec spec;
  spec.extra_tensor = "attn_q_norm.weight";
  expect_load_error(spec, "extra", "tensor 'blk.0.attn_q_norm.weight' is not part of the llama architecture");
}

TEST(ModelLoad, MissingFamilyTensorIsNamed) {
  test::TinyModelSpec spec;
  spec.arch = "qwen3";
  spec.omit_tensor = "blk.1.attn_k_norm.weight";
  expect_load_error(spec, "missing_norm", "missing tensor 'blk.1.attn_k_norm.weight'");
}

TEST(ModelLoad, TruncatedFileIsRejectedWithMessage) {
  const std::string path = test::temp_model_path("truncated");
  test::write_tiny_model(path, {});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  try {
    Model::load(path);
    FAIL() << "loaded a truncated model";
  } catch (const GgufError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashserve
