// Qwen3: each head's Q and K normed (RMSNorm over head_dim) before RoPE, which rotates halves.
// Heads may be wider than dim / heads (attention.key_length).
#include "model/model_family.h"

namespace flashserve {

extern const ModelFamily kQwen3Family{"qwen3", /*rope_neox=*/true, {.qk_norm = Presence::kRequired}, nullptr};

}  // namespace flashserve
