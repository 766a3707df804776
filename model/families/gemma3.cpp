// Gemma 3 as llama.cpp runs it: Qwen3's per-head Q/K norms, embeddings scaled by sqrt(dim), a
// GeGLU MLP, each branch's output normed before the residual add, and five local layers (a
// sliding window, RoPE base 10000, no RoPE scaling) to every global one.
#include "model/model_family.h"

#include <cmath>

#include "model/model_config.h"

namespace flashserve {
namespace {

void read_gemma3(const ConfigKeys& k, ModelConfig& c) {
  c.embed_scale = std::sqrt(float(c.dim));
  c.geglu = true;
  c.sliding_window = k.positive_int("attention.sliding_window");
  c.swa_period = 6;
  c.rope_theta_local = 10000.0f;
}

}  // namespace

extern const ModelFamily kGemma3Family{
    "gemma3", /*rope_neox=*/true, {.qk_norm = Presence::kRequired, .post_norms = Presence::kRequired}, read_gemma3};

}  // namespace flashserve
