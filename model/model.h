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

// One layer's weights in the form a stage holds them: bound in the mapped file (LayerWeights, the
// Model's) or mapped on a backend (the runner's). Declared once for both, and for_each_weight
// walks two forms member by member; so a new weight is a member here, its line there, its binding
// (model.cpp) and its use (llama_forward.cpp).
template <class Vector, class Matrix, class Experts>
struct LayerOf {
  Vector attn_norm{}, ffn_norm{};  // [dim]
  Matrix wq{};                     // [num_heads * head_dim][dim]
  Matrix wk{}, wv{};               // [num_kv_heads * head_dim][dim]
  Matrix wo{};                     // [dim][num_heads * head_dim]
  Vector bq{}, bk{}, bv{};         // projection biases (Qwen2); empty when the file has none
  Vector q_norm{}, k_norm{};       // [head_dim] RMSNorm of each head's Q and K (Qwen3, Gemma 3); or empty
  Vector post_attn_norm{}, post_ffn_norm{};  // [dim] norms of each branch's output (Gemma 3); or empty
  Matrix w_gate{}, w_up{};         // [ffn_dim][dim]; unbound in MoE models
  Matrix w_down{};                 // [dim][ffn_dim]; unbound in MoE models
  // A mixture of experts (bound only when the config has experts): the router picks experts per
  // token, each expert is a SwiGLU MLP.
  Matrix router{};                  // [num_experts][dim]
  Experts gate_exps{}, up_exps{};   // num_experts x [ffn_dim][dim]
  Experts down_exps{};              // num_experts x [dim][ffn_dim]
};

// f(from.w, to.w) for every weight w of a layer, from one form to another.
template <class From, class To, class F>
void for_each_weight(const From& from, To& to, F&& f) {
  f(from.attn_norm, to.attn_norm);
  f(from.ffn_norm, to.ffn_norm);
  f(from.wq, to.wq);
  f(from.wk, to.wk);
  f(from.wv, to.wv);
  f(from.wo, to.wo);
  f(from.bq, to.bq);
  f(from.bk, to.bk);
  f(from.bv, to.bv);
  f(from.q_norm, to.q_norm);
  f(from.k_norm, to.k_norm);
  f(from.post_attn_norm, to.post_attn_norm);
  f(from.post_ffn_norm, to.post_ffn_norm);
  f(from.w_gate, to.w_gate);
  f(from.w_up, to.w_up);
  f(from.w_down, to.w_down);
  f(from.router, to.router);
  f(from.gate_exps, to.gate_exps);
  f(from.up_exps, to.up_exps);
  f(from.down_exps, to.down_exps);
}

using LayerWeights = LayerOf<std::vector<float>, WeightMatrix, StackedWeights>;

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
