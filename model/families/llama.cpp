// Llama 2/3, Mistral, SmolLM and their kin: the shared layer sequence as it stands, RoPE on
// adjacent pairs. Projection biases are optional (as llama.cpp loads them); a file that sets
// attention.sliding_window (Mistral 7B v0.1) has every layer attend to its last window of
// positions, with the model's own RoPE.
#include "model/model_config.h"
#include "model/model_family.h"

namespace flashserve {
namespace {

void read_llama(const ConfigKeys& k, ModelConfig& c) {
  if (k.has("attention.sliding_window")) c.sliding_window = k.positive_int("attention.sliding_window");
}

}  // namespace

extern const ModelFamily kLlamaFamily{"llama", /*rope_neox=*/false, {.qkv_bias = Presence::kOptional}, read_llama};

}  // namespace flashserve
