// bench/synthetic_gguf.py, the writer of the random-weight models our GPU and large-shape benchmarks
// serve: its files load as the named shape, carry SmolLM2's tokenizer, and compute what exact
// arithmetic computes on them, with logits of a sane scale (random weights that blew activations up
// or down would make every speed figure measured on them meaningless: NaN paths, early EOS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/gguf.h"
#include "model/model.h"
#include "tests/util/llamacpp_agreement.h"
#include "tests/util/reference_llama.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;

// Writes the "tiny" shape (width 256, FFN 512, 2 layers, 4 heads, 2 KV heads) in `type`.
fs::path write_tiny(const std::string& type) {
  const std::string python = FLASHSERVE_VENV_PYTHON;
  if (!fs::exists(python)) return {};
  const fs::path out = fs::temp_directory_path() / ("flashserve_synthetic_" + std::to_string(::getpid()) + "_" + type + ".gguf");
  const std::string cmd = python + " " + FLASHSERVE_SOURCE_DIR + "/bench/synthetic_gguf.py --shape tiny --type " + type +
                          " --out " + out.string() + " --tokenizer " + test::real_model_path() + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

class SyntheticGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(SyntheticGguf, LoadsAsTheShapeAndMatchesExactArithmetic) {
  const fs::path path = write_tiny(GetParam());
  if (path.empty()) GTEST_SKIP() << "no " << FLASHSERVE_VENV_PYTHON << " with gguf (run scripts/setup.sh)";
  const auto model = Model::load(path.string());
  const auto smollm2 = Model::load(test::real_model_path());
  const ModelConfig& c = model->config();
  EXPECT_EQ(c.arch, "llama");
  EXPECT_EQ(c.dim, 256);
  EXPECT_EQ(c.ffn_dim, 512);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 4);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.vocab_size, smollm2->config().vocab_size);

  const std::string text = "The quick brown fox jumps over the lazy dog. Les élèves ont étudié.";
  const auto tokens = model->tokenizer().encode(text, true, false);
  EXPECT_EQ(tokens, smollm2->tokenizer().encode(text, true, false));

  const ForwardOutput ours = test::score_all_positions(*model, tokens);
  const auto exact = test::reference_logits(*GgufFile::open(path.string()), tokens);
  ASSERT_EQ(ours.logits.size(), tokens.size() * size_t(ours.vocab_size));
  double max_abs = 0, max_err = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int32_t v = 0; v < ours.vocab_size; ++v) {
      const double want = exact[t][size_t(v)];
      max_abs = std::max(max_abs, std::abs(want));
      max_err = std::max(max_err, std::abs(ours.logits[t * size_t(ours.vocab_size) + size_t(v)] - want));
    }
  }
  std::printf("[ scale ] %s: max |logit| %.2f, max |ours - exact| %.2e\n", GetParam().c_str(), max_abs, max_err);
  EXPECT_LT(max_err, 1e-3 * (1 + max_abs));
  EXPECT_GT(max_abs, 1.0);
  EXPECT_LT(max_abs, 100.0);
  fs::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticGguf, ::testing::Values("f16", "bf16", "q8_0", "q4_0"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace flashserve
