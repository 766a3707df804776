// Hyperparameters of the Llama-family architectures, read from GGUF metadata (`<arch>.*` keys).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flashserve {

class GgufFile;

// How an embedding is made of a prompt's final hidden states: `<arch>.pooling_type` in llama.cpp's
// numbering (1 mean, 2 cls: the first token, 3 last, 4 rank: a reranker's). Causal language models
// carry none (0 or absent): their last token is the one that has seen the whole prompt.
enum class Pooling { Mean, Cls, Last, Rank };
const char* to_string(Pooling p);

struct ModelConfig {
  std::string arch;              // general.architecture: one of model_family.h's families
  std::string name;              // general.name, if present
  int32_t num_layers = 0;        // block_count
  int32_t dim = 0;               // embedding_length
  int32_t ffn_dim = 0;           // feed_forward_length
  int32_t num_heads = 0;         // attention.head_count
  int32_t num_kv_heads = 0;      // attention.head_count_kv (defaults to num_heads)
  int32_t head_dim = 0;          // attention.key_length, else dim / num_heads
  int32_t vocab_size = 0;        // vocab_size, else the tokenizer's token count
  int32_t context_len = 0;       // context_length
  int32_t rope_dim = 0;          // rope.dimension_count, else head_dim
  float rope_theta = 10000.0f;   // rope.freq_base
  float rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor when rope.scaling.type is "linear"
  bool rope_neox = false;        // rotate halves rather than adjacent pairs (Qwen files keep it)
  bool rope_freqs_required = false;  // rope.scaling.type "llama3": the file must carry rope_freqs.weight
  float rms_eps = 1e-5f;         // attention.layer_norm_rms_epsilon
  // The switches of the shared layer sequence a family's keys turn on (model/families/): Gemma 3's
  // GeGLU and sliding-window layers (every layer but each swa_period-th attends to its last
  // sliding_window positions, with RoPE base rope_theta_local and no RoPE scaling; swa_period 0:
  // every layer local, with the model's own RoPE); Gemma 3's and Granite's multipliers.
  float embed_scale = 1.0f;      // embeddings times this
  float residual_scale = 1.0f;   // each branch's output times this before the residual add
  float attention_scale = 0.0f;  // the scores' scale; 0: 1/sqrt(head_dim)
  float logit_multiplier = 1.0f; // logits times this
  bool geglu = false;
  int32_t sliding_window = 0;    // 0: every layer global
  int32_t swa_period = 0;
  float rope_theta_local = 0.0f;
  int32_t num_experts = 0;       // expert_count; 0 for a dense (non-MoE) FFN
  int32_t num_experts_used = 0;  // expert_used_count: experts each token is routed to
  Pooling pooling = Pooling::Last;

  bool is_moe() const { return num_experts > 0; }
  bool is_local_layer(int32_t layer) const {
    return sliding_window > 0 && (swa_period == 0 || (layer + 1) % swa_period != 0);
  }
};

// Throws GgufError naming a missing or inconsistent key (e.g. heads not dividing dim).
ModelConfig read_model_config(const GgufFile& f);

}  // namespace flashserve
