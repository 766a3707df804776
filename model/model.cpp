// Loading: maps the file, reads hyperparameters and tokenizer, and binds every tensor with its
// expected shape (the family's own among them, model/families/) so that forward() never meets a
// surprise.
#include "model/model.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "model/model_family.h"

namespace flashserve {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

// Binds tensors by name, checking each shape, and remembers which it bound: a file whose tensors
// are not all used is refused (as llama.cpp refuses them), since a tensor the layer sequence
// skipped would be a part of the model silently left out.
class TensorBinder {
 public:
  explicit TensorBinder(const GgufFile& f) : f_(f) {}

  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // GGUF stores a [rows][cols] matrix with shape {cols, rows}.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols) {
    const GgufTensor& t = require(name, {cols, rows});
    return WeightMatrix{t.data, t.type, rows, cols};
  }

  StackedWeights stacked(const std::string& name, int64_t count, int64_t rows, int64_t cols) {
    const GgufTensor& t = require(name, {cols, rows, count});
    return StackedWeights{t.data, t.type, count, rows, cols};
  }

  // Norm weights and biases are tiny: an f32 copy whatever their stored type.
  std::vector<float> vector(const std::string& name, int64_t n) {
    const GgufTensor& t = require(name, {n});
    std::vector<float> out(n);
    kernels::dequantize_row(t.type, t.data, out.data(), n);
    return out;
  }

  // Whether to bind a layer's group of tensors, of which `name` is one.
  bool wants(Presence need, const std::string& name) const {
    return need == Presence::kRequired || (need == Presence::kOptional && has(name));
  }

  void check_all_bound(const std::string& arch) const {
    for (const GgufTensor& t : f_.tensors()) {
      if (!bound_.count(t.name)) {
        throw GgufError(f_.path() + ": tensor '" + t.name + "' is not part of the " + arch +
                        " architecture (a file of another family, or one this server cannot run faithfully)");
      }
    }
  }

 private:
  const GgufTensor& require(const std::string& name, const std::vector<int64_t>& shape) {
    const GgufTensor* t = f_.find_tensor(name);
    if (!t) throw GgufError(f_.path() + ": missing tensor '" + name + "'");
    if (t->shape != shape) {
      throw GgufError(f_.path() + ": tensor '" + name + "' has shape " + shape_str(t->shape) + ", expected " +
                      shape_str(shape));
    }
    bound_.insert(name);
    return *t;
  }

  const GgufFile& f_;
  std::unordered_set<std::string> bound_;
};

void bind_moe(TensorBinder& b, const std::string& p, const ModelConfig& c, LayerWeights& l) {
  l.router = b.matrix(p + "ffn_gate_inp.weight", c.num_experts, c.dim);
  l.gate_exps = b.stacked(p + "ffn_gate_exps.weight", c.num_experts, c.ffn_dim, c.dim);
  l.up_exps = b.stacked(p + "ffn_up_exps.weight", c.num_experts, c.ffn_dim, c.dim);
  l.down_exps = b.stacked(p + "ffn_down_exps.weight", c.num_experts, c.dim, c.ffn_dim);
}

}  // namespace

WeightMatrix StackedWeights::expert(int64_t e) const {
  const size_t matrix_bytes = size_t(rows) * kernels::row_bytes(type, cols);
  return WeightMatrix{static_cast<const char*>(data) + size_t(e) * matrix_bytes, type, rows, cols};
}

std::unique_ptr<Model> Model::load(const std::string& path) {
  std::unique_ptr<Model> m(new Model());
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

void Model::bind_weights() {
  const ModelConfig& c = cfg_;
  const LayerTensors& extra = find_family(c.arch)->tensors;
  TensorBinder b(*file_);
  const int64_t q_dim = int64_t(c.num_heads) * c.head_dim;
  const int64_t kv_dim = int64_t(c.num_kv_heads) * c.head_dim;
  token_embd_ = b.matrix("token_embd.weight", c.vocab_size, c.dim);
  output_ = b.has("output.weight") ? b.matrix("output.weight", c.vocab_size, c.dim) : token_embd_;
  output_norm_ = b.vector("output_norm.weight", c.dim);
  if (b.has("rope_freqs.weight") || c.rope_freqs_required) rope_freq_factors_ = b.vector("rope_freqs.weight", c.rope_dim / 2);

  layers_.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = layers_[i];
    l.attn_norm = b.vector(p + "attn_norm.weight", c.dim);
    l.ffn_norm = b.vector(p + "ffn_norm.weight", c.dim);
    l.wq = b.matrix(p + "attn_q.weight", q_dim, c.dim);
    l.wk = b.matrix(p + "attn_k.weight", kv_dim, c.dim);
    l.wv = b.matrix(p + "attn_v.weight", kv_dim, c.dim);
    l.wo = b.matrix(p + "attn_output.weight", c.dim, q_dim);
    if (b.wants(extra.qkv_bias, p + "attn_q.bias")) {
      l.bq = b.vector(p + "attn_q.bias", q_dim);
      l.bk = b.vector(p + "attn_k.bias", kv_dim);
      l.bv = b.vector(p + "attn_v.bias", kv_dim);
    }
    if (b.wants(extra.qk_norm, p + "attn_q_norm.weight")) {
      l.q_norm = b.vector(p + "attn_q_norm.weight", c.head_dim);
      l.k_norm = b.vector(p + "attn_k_norm.weight", c.head_dim);
    }
    if (b.wants(extra.post_norms, p + "post_attention_norm.weight")) {
      l.post_attn_norm = b.vector(p + "post_attention_norm.weight", c.dim);
      l.post_ffn_norm = b.vector(p + "post_ffw_norm.weight", c.dim);
    }
    if (c.is_moe()) {
      bind_moe(b, p, c, l);
      continue;
    }
    l.w_gate = b.matrix(p + "ffn_gate.weight", c.ffn_dim, c.dim);
    l.w_up = b.matrix(p + "ffn_up.weight", c.ffn_dim, c.dim);
    l.w_down = b.matrix(p + "ffn_down.weight", c.dim, c.ffn_dim);
  }
  b.check_all_bound(c.arch);
}

std::string Model::chat_template_source() const {
  return file_->get_string("tokenizer.chat_template", "");
}

// The file's own template; a file without one gets the built-in family its vocabulary points to.
ChatTemplate Model::chat_template() const {
  const Tokenizer& tok = *tokenizer_;
  const std::string bos = tok.token_text(tok.bos_id()), eos = tok.token_text(tok.eos_id());
  const std::string source = chat_template_source();
  if (!source.empty()) return ChatTemplate::from_source(source, bos, eos);
  const auto& vocab = tok.data().tokens;
  const auto in_vocab = [&](const std::string& t) { return std::find(vocab.begin(), vocab.end(), t) != vocab.end(); };
  if (auto family = ChatTemplate::guess_builtin(in_vocab)) return ChatTemplate::builtin(*family, bos, eos);
  throw UnsupportedTemplate("the model has no chat template and its vocabulary matches no built-in one");
}

ChatTemplate Model::chat_template_from(const std::string& path) const {
  const Tokenizer& tok = *tokenizer_;
  return ChatTemplate::from_file(path, tok.token_text(tok.bos_id()), tok.token_text(tok.eos_id()));
}

std::vector<int32_t> Model::encode_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages) const {
  return encode_rendered_chat(tmpl.apply(messages, /*add_generation_prompt=*/true));
}

std::vector<int32_t> Model::encode_rendered_chat(const std::string& text) const {
  const Tokenizer& tok = *tokenizer_;
  const bool has_bos = tok.bos_id() >= 0 && text.starts_with(tok.token_text(tok.bos_id()));
  return tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/true);
}

}  // namespace flashserve
