// Qwen2 and Qwen2.5: Llama's layers with biased Q/K/V projections and RoPE on halves of each head.
#include "model/model_family.h"

namespace flashserve {

extern const ModelFamily kQwen2Family{"qwen2", /*rope_neox=*/true, {.qkv_bias = Presence::kRequired}, nullptr};

}  // namespace flashserve
