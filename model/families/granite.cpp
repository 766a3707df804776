// IBM Granite 3.x (dense): Llama's layers and tensors with four multipliers from the file --
// embeddings times embedding_scale, each branch's output times residual_scale before it joins the
// residual stream, attention.scale in place of 1/sqrt(head_dim), and the logits divided by
// logit_scale -- as llama.cpp's granite graph applies them. As there, a multiplier of 0 or one
// left out is no multiplier (logit_scale is required).
#include "model/model_family.h"

#include "model/model_config.h"

namespace flashserve {
namespace {

// The key's value, or `unset` where the file leaves it out or writes 0.
float multiplier(const ConfigKeys& k, const std::string& name, float unset) {
  const float v = k.finite_float(name, 0.0f);
  if (v < 0) k.fail(name, "must not be negative, got " + std::to_string(v));
  return v == 0 ? unset : v;
}

void read_granite(const ConfigKeys& k, ModelConfig& c) {
  c.embed_scale = multiplier(k, "embedding_scale", 1.0f);
  c.residual_scale = multiplier(k, "residual_scale", 1.0f);
  c.attention_scale = multiplier(k, "attention.scale", 0.0f);
  c.logit_multiplier = 1.0f / k.positive_float("logit_scale");
}

}  // namespace

extern const ModelFamily kGraniteFamily{"granite", /*rope_neox=*/false, {}, read_granite};

}  // namespace flashserve
