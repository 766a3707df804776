// Loading: maps the file, reads hyperparameters and tokenizer, and binds every tensor with its
// expected shape so that forward() never meets a surprise.
#include "model/llama_model.h"

#include <algorithm>
#include <string>

namespace flashserve {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

const GgufTensor& require_tensor(const GgufFile& f, const std::string& name, std::vector<int64_t> shape) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) throw GgufError(f.path() + ": missing tensor '" + name + "'");
  if (t->shape != shape) {
    throw GgufError(f.path() + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                    shape_str(shape));
  }
  return *t;
}

// GGUF stores a [rows][cols] matrix with shape {cols, rows}.
WeightMatrix bind_matrix(const GgufFile& f, const std::string& name, int64_t rows, int64_t cols) {
  const GgufTensor& t = require_tensor(f, name, {cols, rows});
  return WeightMatrix{t.data, t.type, rows, cols};
}

StackedWeights bind_stacked(const GgufFile& f, const std::string& name, int64_t count, int64_t rows, int64_t cols) {
  const GgufTensor& t = require_tensor(f, name, {cols, rows, count});
  return StackedWeights{t.data, t.type, count, rows, cols};
}

MoeWeights bind_moe(const GgufFile& f, const std::string& p, const ModelConfig& c) {
  return MoeWeights{bind_matrix(f, p + "ffn_gate_inp.weight", c.num_experts, c.dim),
                    bind_stacked(f, p + "ffn_gate_exps.weight", c.num_experts, c.ffn_dim, c.dim),
                    bind_stacked(f, p + "ffn_up_exps.weight", c.num_experts, c.ffn_dim, c.dim),
                    bind_stacked(f, p + "ffn_down_exps.weight", c.num_experts, c.dim, c.ffn_dim)};
}

// Norm weights are tiny: keep an f32 copy whatever their stored type.
std::vector<float> load_vector(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensor& t = require_tensor(f, name, {n});
  std::vector<float> out(n);
  kernels::dequantize_row(t.type, t.data, out.data(), n);
  return out;
}

}  // namespace

WeightMatrix StackedWeights::expert(int64_t e) const {
  const size_t matrix_bytes = size_t(rows) * kernels::row_bytes(type, cols);
  return WeightMatrix{static_cast<const char*>(data) + size_t(e) * matrix_bytes, type, rows, cols};
}

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path) {
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = GgufFile::open(path);
  m->cfg_ = read_model_config(*m->file_);
  m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::data_from_gguf(*m->file_));
  if (m->tokenizer_->vocab_size() != m->cfg_.vocab_size) {
    throw GgufError(path + ": tokenizer has " + std::to_string(m->tokenizer_->vocab_size()) +
                    " tokens but the model's vocab_size is " + std::to_string(m->cfg_.vocab_size));
  }
  m->bind_weights();
  return m;
}

void LlamaModel::bind_weights() {
  const GgufFile& f = *file_;
  const ModelConfig& c = cfg_;
  const int64_t q_dim = int64_t(c.num_heads) * c.head_dim;
  const int64_t kv_dim = int64_t(c.num_kv_heads) * c.head_dim;
  token_embd_ = bind_matrix(f, "token_embd.weight", c.vocab_size, c.dim);
  output_ = f.find_tensor("output.weight") ? bind_matrix(f, "output.weight", c.vocab_size, c.dim) : token_embd_;
  output_norm_ = load_vector(f, "output_norm.weight", c.dim);
  if (f.find_tensor("rope_freqs.weight") || c.rope_freqs_required) {
    rope_freq_factors_ = load_vector(f, "rope_freqs.weight", c.rope_dim / 2);
  }

  layers_.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[i];
    l.attn_norm = load_vector(f, p + "attn_norm.weight", c.dim);
    l.ffn_norm = load_vector(f, p + "ffn_norm.weight", c.dim);
    l.wq = bind_matrix(f, p + "attn_q.weight", q_dim, c.dim);
    l.wk = bind_matrix(f, p + "attn_k.weight", kv_dim, c.dim);
    l.wv = bind_matrix(f, p + "attn_v.weight", kv_dim, c.dim);
    l.wo = bind_matrix(f, p + "attn_output.weight", c.dim, q_dim);
    if (f.find_tensor(p + "attn_q.bias")) {
      l.bq = load_vector(f, p + "attn_q.bias", q_dim);
      l.bk = load_vector(f, p + "attn_k.bias", kv_dim);
      l.bv = load_vector(f, p + "attn_v.bias", kv_dim);
    }
    if (f.find_tensor(p + "attn_q_norm.weight")) {
      l.q_norm = load_vector(f, p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = load_vector(f, p + "attn_k_norm.weight", c.head_dim);
    }
    if (f.find_tensor(p + "post_attention_norm.weight")) {
      l.post_attn_norm = load_vector(f, p + "post_attention_norm.weight", c.dim);
      l.post_ffn_norm = load_vector(f, p + "post_ffw_norm.weight", c.dim);
    }
    if (c.is_moe()) {
      l.moe = bind_moe(f, p, c);
      continue;
    }
    l.w_gate = bind_matrix(f, p + "ffn_gate.weight", c.ffn_dim, c.dim);
    l.w_up = bind_matrix(f, p + "ffn_up.weight", c.ffn_dim, c.dim);
    l.w_down = bind_matrix(f, p + "ffn_down.weight", c.dim, c.ffn_dim);
  }
}

std::string LlamaModel::chat_template_source() const {
  return file_->get_string("tokenizer.chat_template", "");
}

// The file's own template; a file without one gets the built-in family its vocabulary points to.
ChatTemplate LlamaModel::chat_template() const {
  const Tokenizer& tok = *tokenizer_;
  const std::string bos = tok.token_text(tok.bos_id()), eos = tok.token_text(tok.eos_id());
  const std::string source = chat_template_source();
  if (!source.empty()) return ChatTemplate::from_source(source, bos, eos);
  const auto& vocab = tok.data().tokens;
  const auto in_vocab = [&](const std::string& t) { return std::find(vocab.begin(), vocab.end(), t) != vocab.end(); };
  if (auto family = ChatTemplate::guess_builtin(in_vocab)) return ChatTemplate::builtin(*family, bos, eos);
  throw UnsupportedTemplate("the model has no chat template and its vocabulary matches no built-in one");
}

ChatTemplate LlamaModel::chat_template_from(const std::string& path) const {
  const Tokenizer& tok = *tokenizer_;
  return ChatTemplate::from_file(path, tok.token_text(tok.bos_id()), tok.token_text(tok.eos_id()));
}

std::vector<int32_t> LlamaModel::encode_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) const {
  return encode_rendered_chat(tmpl.apply(messages, /*add_generation_prompt=*/true));
}

std::vector<int32_t> LlamaModel::encode_rendered_chat(const std::string& text) const {
  const Tokenizer& tok = *tokenizer_;
  const bool has_bos = tok.bos_id() >= 0 && text.starts_with(tok.token_text(tok.bos_id()));
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace flashserve
