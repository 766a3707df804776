// Model hyperparameters: the real SmolLM2 file, defaults for optional keys, and an error naming
// the key for every missing or inconsistent value.
#include "model/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <map>
#include <variant>

#include "model/gguf.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;

TEST(ModelConfigRealModel, SmolLM2) {
  auto f = GgufFile::open(test::real_model_path());
  ModelConfig c = read_model_config(*f);
  EXPECT_EQ(c.arch, "llama");
  EXPECT_FALSE(c.name.empty());
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.ffn_dim, 1536);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.context_len, 8192);
  EXPECT_EQ(c.rope_dim, 64);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-9f);
}

using Value = std::variant<uint32_t, float, std::string>;

// Writes `keys` (plus a 3-token vocabulary unless disabled) and reads the config back.
class ModelConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = (fs::temp_directory_path() / ("flashserve_config_" + std::to_string(::getpid()) + "_" +
                                          info->name() + ".gguf")).string();
  }
  void TearDown() override { fs::remove(path_); }

  ModelConfig load() {
    GgufWriter w;
    for (const auto& [key, value] : keys) {
      if (const auto* u = std::get_if<uint32_t>(&value)) w.add_uint32(key, *u);
      if (const auto* x = std::get_if<float>(&value)) w.add_float32(key, *x);
      if (const auto* s = std::get_if<std::string>(&value)) w.add_string(key, *s);
    }
    if (with_tokens) w.add_string_array("tokenizer.ggml.tokens", {"<s>", "a", "b"});
    w.write(path_);
    return read_model_config(*GgufFile::open(path_));
  }

  // load() must fail with a message naming the file and containing every fragment.
  void expect_error(const std::vector<std::string>& fragments) {
    try {
      load();
      ADD_FAILURE() << "expected a GgufError";
    } catch (const GgufError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path_), std::string::npos) << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }

  std::map<std::string, Value> keys = {
      {"general.architecture", std::string("llama")},
      {"general.name", std::string("tiny")},
      {"llama.block_count", 2u},
      {"llama.embedding_length", 64u},
      {"llama.feed_forward_length", 96u},
      {"llama.attention.head_count", 4u},
      {"llama.context_length", 256u},
      {"llama.attention.layer_norm_rms_epsilon", 1e-6f},
  };
  bool with_tokens = true;
  std::string path_;
};

TEST_F(ModelConfigTest, DefaultsForOptionalKeys) {
  ModelConfig c = load();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.name, "tiny");
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.ffn_dim, 96);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 16);
  EXPECT_EQ(c.context_len, 256);
  EXPECT_EQ(c.vocab_size, 3);
  EXPECT_FLOAT_EQ(c.rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-6f);
}

TEST_F(ModelConfigTest, ExplicitOptionalKeys) {
  keys["llama.attention.head_count_kv"] = 2u;
  keys["llama.attention.key_length"] = 16u;
  keys["llama.attention.value_length"] = 16u;
  keys["llama.rope.dimension_count"] = 8u;
  keys["llama.rope.freq_base"] = 500000.0f;
  keys["llama.rope.scaling.type"] = std::string("linear");
  keys["llama.rope.scaling.factor"] = 4.0f;
  keys["llama.vocab_size"] = 1000u;
  ModelConfig c = load();
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.rope_dim, 8);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
  EXPECT_EQ(c.vocab_size, 1000);
}

TEST_F(ModelConfigTest, ScalingTypeNoneIgnoresFactor) {
  keys["llama.rope.scaling.type"] = std::string("none");
  keys["llama.rope.scaling.factor"] = 8.0f;
  EXPECT_FLOAT_EQ(load().rope_freq_scale, 1.0f);
}

TEST_F(ModelConfigTest, EachRequiredKeyIsNamedWhenMissing) {
  const auto all = keys;
  for (const char* key : {"general.architecture", "llama.block_count", "llama.embedding_length",
                          "llama.feed_forward_length", "llama.attention.head_count", "llama.context_length",
                          "llama.attention.layer_norm_rms_epsilon"}) {
    SCOPED_TRACE(key);
    keys = all;
    keys.erase(key);
    expect_error({"missing metadata key '" + std::string(key) + "'"});
  }
}

TEST_F(ModelConfigTest, UnsupportedArchitecture) {
  keys["general.architecture"] = std::string("gpt2");
  expect_error({"unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, gemma3, granite)"});
}

// The common keys under granite's prefix, and its multipliers: the logit scale required, the
// others optional, 0 meaning none (as llama.cpp reads them).
class GraniteConfigTest : public ModelConfigTest {
 protected:
  void SetUp() override {
    ModelConfigTest::SetUp();
    std::map<std::string, Value> granite;
    for (const auto& [key, value] : keys) {
      granite[key.starts_with("llama.") ? "granite." + key.substr(6) : key] = value;
    }
    granite["general.architecture"] = std::string("granite");
    granite["granite.logit_scale"] = 8.0f;
    keys = granite;
  }
};

TEST_F(GraniteConfigTest, MultipliersRead) {
  keys["granite.embedding_scale"] = 12.0f;
  keys["granite.residual_scale"] = 0.22f;
  keys["granite.attention.scale"] = 0.0078125f;
  const ModelConfig c = load();
  EXPECT_FALSE(c.rope_neox);
  EXPECT_FLOAT_EQ(c.embed_scale, 12.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 0.22f);
  EXPECT_FLOAT_EQ(c.attention_scale, 0.0078125f);
  EXPECT_FLOAT_EQ(c.logit_multiplier, 0.125f);
}

TEST_F(GraniteConfigTest, LeftOutOrZeroMeansNone) {
  keys["granite.residual_scale"] = 0.0f;
  const ModelConfig c = load();
  EXPECT_FLOAT_EQ(c.embed_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.residual_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.attention_scale, 0.0f);  // 1/sqrt(head_dim)
}

TEST_F(GraniteConfigTest, BadMultipliersNameTheKey) {
  const auto all = keys;
  keys.erase("granite.logit_scale");
  expect_error({"missing metadata key 'granite.logit_scale'"});
  keys = all;
  keys["granite.logit_scale"] = 0.0f;
  expect_error({"granite.logit_scale must be a positive number"});
  keys = all;
  keys["granite.residual_scale"] = -0.5f;
  expect_error({"granite.residual_scale must not be negative"});
  keys = all;
  keys["granite.embedding_scale"] = std::numeric_limits<float>::infinity();
  expect_error({"granite.embedding_scale must be a finite number"});
}

TEST_F(ModelConfigTest, VocabularyNeedsSizeOrTokens) {
  with_tokens = false;
  expect_error({"llama.vocab_size", "tokenizer.ggml.tokens"});
  keys["llama.vocab_size"] = 32u;
  EXPECT_EQ(load().vocab_size, 32);
}

TEST_F(ModelConfigTest, InconsistentValuesNameTheKey) {
  struct Case {
    std::string key;
    Value value;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"llama.block_count", 0u, "llama.block_count must be a positive"},
      {"llama.embedding_length", 3000000000u, "llama.embedding_length must be a positive"},
      {"llama.feed_forward_length", std::string("96"), "'llama.feed_forward_length' has type STRING"},
      {"llama.attention.head_count_kv", 3u, "llama.attention.head_count_kv (3) must divide"},
      {"llama.attention.head_count", 5u, "llama.attention.head_count (5) must divide llama.embedding_length"},
      {"llama.attention.value_length", 32u, "llama.attention.value_length must equal the key length 16"},
      {"llama.attention.value_length", 8u, "llama.attention.value_length must equal"},
      {"llama.attention.layer_norm_rms_epsilon", -1.0f, "llama.attention.layer_norm_rms_epsilon must be"},
      {"llama.rope.dimension_count", 15u, "llama.rope.dimension_count (15) must be even"},
      {"llama.rope.dimension_count", 32u, "llama.rope.dimension_count (32) must be even and at most"},
      {"llama.rope.freq_base", 0.0f, "llama.rope.freq_base must be a positive"},
      {"llama.rope.scaling.type", std::string("yarn"), "llama.rope.scaling.type 'yarn' is not supported (only 'none', 'linear' and 'llama3')"},
  };
  const auto all = keys;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key);
    keys = all;
    keys[c.key] = c.value;
    expect_error({c.fragment});
  }
}

TEST_F(ModelConfigTest, DenseUnlessExpertsAreDeclared) {
  EXPECT_FALSE(load().is_moe());
  keys["llama.expert_count"] = 0u;
  keys["llama.expert_used_count"] = 0u;
  EXPECT_FALSE(load().is_moe());
}

TEST_F(ModelConfigTest, ExpertCounts) {
  keys["llama.expert_count"] = 8u;
  keys["llama.expert_used_count"] = 2u;
  ModelConfig c = load();
  EXPECT_TRUE(c.is_moe());
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_experts_used, 2);
}

TEST_F(ModelConfigTest, BadExpertCountsNameTheKey) {
  struct Case {
    uint32_t experts, used;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {8, 0, "llama.expert_used_count (0) must be between 1 and 8"},
      {4, 5, "llama.expert_used_count (5) must be between 1 and 4"},
      {64, 9, "llama.expert_used_count (9) must be between 1 and 8"},
      {257, 2, "llama.expert_count (257) exceeds the supported maximum of 256"},
      {0, 2, "llama.expert_used_count (2) is set but llama.expert_count is 0 or missing"},
  };
  const auto all = keys;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fragment);
    keys = all;
    keys["llama.expert_count"] = c.experts;
    keys["llama.expert_used_count"] = c.used;
    expect_error({c.fragment});
  }
  keys = all;
  keys["llama.expert_count"] = 8u;
  expect_error({"llama.expert_used_count (0) must be between 1 and 8"});
}

TEST_F(ModelConfigTest, LinearScalingNeedsPositiveFactor) {
  keys["llama.rope.scaling.type"] = std::string("linear");
  keys["llama.rope.scaling.factor"] = 0.0f;
  expect_error({"llama.rope.scaling.factor must be a positive"});
}

}  // namespace
}  // namespace flashserve
