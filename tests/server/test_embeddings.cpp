// /v1/embeddings on tiny random models: every input computed by the engine and pooled as the model
// file says (mean, first token, last token), compared with an f64 reference forward pass -- whole
// and across chunked prefill, alone and batched, after prefix-cache hits -- plus base64, the
// pooling state on its own, and the refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "scheduler/pooling.h"
#include "server/embeddings.h"
#include "tests/server/http_harness.h"
#include "tests/util/reference_llama.h"
#include "tests/util/tiny_model.h"

namespace flashserve::test {
namespace {

const std::vector<int32_t> kShort = {5, 70, 71, 72, 9, 33};

std::vector<int32_t> long_prompt() {
  std::vector<int32_t> ids;
  for (int i = 0; i < 45; ++i) ids.push_back(32 + (i * 7) % 90);
  return ids;
}

// The f64 embedding: the final norm's rows pooled, scaled to unit length.
std::vector<double> reference_embedding(const Model& model, const std::vector<int32_t>& ids, Pooling pooling) {
  const std::vector<std::vector<double>> rows = ReferenceLlama(model.file()).hidden_states(ids);
  std::vector<double> v(rows[0].size(), 0.0);
  if (pooling == Pooling::Mean) {
    for (const auto& r : rows) {
      for (size_t d = 0; d < v.size(); ++d) v[d] += r[d] / double(rows.size());
    }
  } else {
    v = pooling == Pooling::Cls ? rows.front() : rows.back();
  }
  double norm = 0;
  for (double x : v) norm += x * x;
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

double max_abs_diff(const json& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) worst = std::max(worst, std::abs(got[i].get<double>() - want[i]));
  return worst;
}

class Embeddings : public ::testing::TestWithParam<int> {
 protected:
  // The pooling_type key the model file carries (-1: none, as in a causal LM: last token).
  Pooling pooling() const { return GetParam() == 1 ? Pooling::Mean : GetParam() == 2 ? Pooling::Cls : Pooling::Last; }
};

TEST_P(Embeddings, MatchAnF64ReferenceWholeChunkedBatchedAndCached) {
  TinyModelSpec spec = tiny_spec_for_server();
  spec.pooling_type = GetParam();
  const std::string path = temp_model_path("embed");
  write_tiny_model(path, spec);
  const std::unique_ptr<Model> model = Model::load(path);
  EngineOptions engine = test_engine_options(4 << 20);
  engine.max_num_batched_tokens = 16;  // the long prompt takes three steps
  HttpHarness h(*model, engine);

  const std::vector<int32_t> longer = long_prompt();
  const std::vector<double> want_short = reference_embedding(*model, kShort, pooling());
  const std::vector<double> want_long = reference_embedding(*model, longer, pooling());
  // F32 weights and activations: only summation order separates us from the reference.
  constexpr double kTolerance = 2e-4;

  const Reply one = post(h, "/v1/embeddings", json{{"input", kShort}});
  ASSERT_EQ(one.status, 200) << one.text;
  EXPECT_EQ(one.body["object"], "list");
  EXPECT_EQ(one.body["data"][0]["object"], "embedding");
  EXPECT_EQ(one.body["usage"]["prompt_tokens"], kShort.size());
  EXPECT_LT(max_abs_diff(one.body["data"][0]["embedding"], want_short), kTolerance);

  // Batched with a prompt chunked over three steps, and again once both are in the prefix cache.
  for (int round = 0; round < 2; ++round) {
    const Reply both = post(h, "/v1/embeddings", json{{"input", {longer, kShort}}});
    ASSERT_EQ(both.status, 200) << both.text;
    ASSERT_EQ(both.body["data"].size(), 2u);
    EXPECT_EQ(both.body["data"][1]["index"], 1);
    EXPECT_LT(max_abs_diff(both.body["data"][0]["embedding"], want_long), kTolerance) << "round " << round;
    EXPECT_LT(max_abs_diff(both.body["data"][1]["embedding"], want_short), kTolerance) << "round " << round;
  }
  // A generation that shares the long prompt's start leaves it cached; pooling still sees every token.
  std::vector<int32_t> prefix(longer.begin(), longer.begin() + 40);
  ASSERT_EQ(post(h, "/v1/completions", json{{"prompt", prefix}, {"max_tokens", 2}}).status, 200);
  const Reply after = post(h, "/v1/embeddings", json{{"input", longer}});
  EXPECT_LT(max_abs_diff(after.body["data"][0]["embedding"], want_long), kTolerance);
  EXPECT_TRUE(all_blocks_free(h.serving));
}

INSTANTIATE_TEST_SUITE_P(PoolingTypes, Embeddings, ::testing::Values(-1, 1, 2, 3),
                         [](const auto& info) { return info.param < 0 ? std::string("none") : std::to_string(info.param); });

TEST(EmbeddingsApi, Base64IsTheSameFloats) {
  HttpHarness h(tiny_model());
  const Reply f = post(h, "/v1/embeddings", json{{"input", "hello there"}, {"encoding_format", "float"}});
  const Reply b = post(h, "/v1/embeddings", json{{"input", "hello there"}, {"encoding_format", "base64"}});
  ASSERT_EQ(f.status, 200) << f.text;
  ASSERT_EQ(b.status, 200) << b.text;
  std::vector<float> floats;
  for (const json& v : f.body["data"][0]["embedding"]) floats.push_back(v.get<float>());
  EXPECT_EQ(b.body["data"][0]["embedding"], base64_floats(floats));
  EXPECT_EQ(base64_floats({1.0f}), "AACAPw==");  // 0x3f800000, little-endian
  double norm = 0;
  for (float x : floats) norm += double(x) * x;
  EXPECT_NEAR(norm, 1.0, 1e-5);
}

TEST(EmbeddingsApi, RefusalsNameTheField) {
  HttpHarness h(tiny_model());
  auto param_of = [&](const json& body) {
    const Reply r = post(h, "/v1/embeddings", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.text;
    return r.body["error"]["param"];
  };
  EXPECT_EQ(param_of(json{{"input", ""}}), "input");
  EXPECT_EQ(param_of(json{{"input", json::array()}}), "input");
  EXPECT_EQ(param_of(json{{"input", {1, -2}}}), "input");
  EXPECT_EQ(param_of(json{{"input", {{1}, "a", 3}}}), "input");
  EXPECT_EQ(param_of(json::object()), "input");
  EXPECT_EQ(param_of(json{{"input", "a"}, {"dimensions", 8}}), "dimensions");
  EXPECT_EQ(param_of(json{{"input", "a"}, {"encoding_format", "int8"}}), "encoding_format");
  EXPECT_EQ(param_of(json{{"input", "a"}, {"stream", true}}), "stream");
  json many = json::array();
  for (int i = 0; i < 2049; ++i) many.push_back("x");
  EXPECT_EQ(param_of(json{{"input", many}}), "input");
  EXPECT_EQ(post(h, "/v1/embeddings", json{{"input", "a"}, {"model", "other"}}).status, 404);
  EXPECT_EQ(post(h, "/v1/embeddings", json{{"input", "a"}, {"dimensions", tiny_spec_for_server().dim}}).status, 200);

  TinyModelSpec spec = tiny_spec_for_server();
  spec.pooling_type = 4;  // a reranker's
  const std::unique_ptr<Model> reranker = load_tiny_model(spec, "rank");
  HttpHarness r(*reranker);
  EXPECT_EQ(post(r, "/v1/embeddings", json{{"input", "a"}}).status, 400);
}

TEST(PooledState, PoolsAcrossChunksAndStartsOverWhenPreempted) {
  const float rows[] = {1, 0, 0, 3, 2, 0};  // three rows of two
  PooledState mean(Pooling::Mean, 3);
  mean.add(rows, 2, 2, 0);
  mean.add(rows + 4, 1, 2, 2);
  std::vector<float> v = mean.embedding();  // sum (3, 3)
  EXPECT_NEAR(v[0], std::sqrt(0.5), 1e-6);
  EXPECT_NEAR(v[1], std::sqrt(0.5), 1e-6);
  PooledState last(Pooling::Last, 3);
  last.add(rows, 2, 2, 0);
  last.reset();
  last.add(rows, 3, 2, 0);
  EXPECT_EQ(last.embedding(), (std::vector<float>{1, 0}));
  PooledState cls(Pooling::Cls, 3);
  cls.add(rows, 1, 2, 0);
  cls.add(rows + 2, 2, 2, 1);
  EXPECT_EQ(cls.embedding(), (std::vector<float>{1, 0}));
}

}  // namespace
}  // namespace flashserve::test
