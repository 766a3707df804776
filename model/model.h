// A model as loaded from GGUF, whichever family of model/families/ it is: hyperparameters,
// tokenizer, chat template -- what the server sees -- and every weight bound in place in the
// memory-mapped file, which only runners read (LlamaRunner runs the shared layer sequence on a
// backend).
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "kernels/dtype.h"
#include "model/chat_template.h"
#include "model/gguf.h"
#include "model/model_config.h"
#include "model/tokenizer.h"

namespace flashserve {

// A weight matrix of `rows` output rows, each `cols` elements of `type`, inside the mapping.
struct WeightMatrix {
  const void* data = nullptr;
  kernels::DType type = kernels::DType::F32;
  int64_t rows = 0;
  int64_t cols = 0;
};

// `count` matrices of [rows][cols], stored back to back (GGUF shape {cols, rows, count}).
struct StackedWeights {
  const void* data = nullptr;
  kernels::DType type = kernels::DType::F32;
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;

  WeightMatrix expert(int64_t e) const;
};

// A mixture-of-experts FFN: the router picks experts per token, each expert is a SwiGLU MLP.
struct MoeWeights {
  WeightMatrix router;     // [num_experts][dim]
  StackedWeights gate, up; // num_experts x [ffn_dim][dim]
  StackedWeights down;     // num_experts x [dim][ffn_dim]
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;   // [dim]
  WeightMatrix wq;     // [num_heads * head_dim][dim]
  WeightMatrix wk, wv; // [num_kv_heads * head_dim][dim]
  WeightMatrix wo;     // [dim][num_heads * head_dim]
  std::vector<float> bq, bk, bv;   // projection biases (Qwen2); empty when the file has none
  std::vector<float> q_norm, k_norm;  // [head_dim] RMSNorm of each head's Q and K (Qwen3, Gemma 3); or empty
  std::vector<float> post_attn_norm, post_ffn_norm;  // [dim] norms of each branch's output (Gemma 3); or empty
  WeightMatrix w_gate, w_up;  // [ffn_dim][dim]; unbound in MoE models
  WeightMatrix w_down;        // [dim][ffn_dim]; unbound in MoE models
  MoeWeights moe;             // bound only when the config has experts
};

class Model {
 public:
  // Throws GgufError (file, metadata or tensor problems, named) or std::invalid_argument
  // (tokenizer data). Never crashes on a bad file.
  static std::unique_ptr<Model> load(const std::string& path);

  const ModelConfig& config() const { return cfg_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const GgufFile& file() const { return *file_; }
  std::string chat_template_source() const;  // empty if the file has none
  // The file's chat template with this vocabulary's BOS/EOS texts; throws UnsupportedTemplate.
  ChatTemplate chat_template() const;
  // The Jinja template in `path` instead (--chat-template); throws UnsupportedTemplate.
  ChatTemplate chat_template_from(const std::string& path) const;
  // Messages -> prompt ids: the template with a generation prompt, special tokens parsed, BOS
  // added only when the template did not already render it (Llama-2/3 and Gemma do).
  std::vector<int32_t> encode_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) const;
  // A conversation the template already rendered (with its generation prompt) -> prompt ids.
  std::vector<int32_t> encode_rendered_chat(const std::string& text) const;

  // The bound weights, which runners map onto their backend.
  const WeightMatrix& token_embedding() const { return token_embd_; }
  const WeightMatrix& output_weight() const { return output_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& rope_freq_factors() const { return rope_freq_factors_; }
  const std::vector<LayerWeights>& layers() const { return layers_; }

 private:
  Model() = default;
  void bind_weights();

  std::unique_ptr<GgufFile> file_;
  ModelConfig cfg_;
  std::unique_ptr<Tokenizer> tokenizer_;
  WeightMatrix token_embd_;   // [vocab][dim]
  WeightMatrix output_;       // [vocab][dim]; token_embd_ when the embedding is tied
  std::vector<float> output_norm_;
  std::vector<float> rope_freq_factors_;  // empty unless the file has rope_freqs.weight
  std::vector<LayerWeights> layers_;
};

}  // namespace flashserve
