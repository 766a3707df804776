#include "tests/util/tiny_model.h"

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <random>
#include <vector>

#include "model/gguf.h"

namespace flashserve::test {
namespace {

// GPT-2's printable stand-in for each byte, as UTF-8.
std::string byte_token(int b) {
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
  int cp = b;
  if (!printable) {
    int n = 0;
    for (int c = 0; c < b; ++c) {
      if (!((c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255))) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

void add_vocab(GgufWriter& w) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(byte_token(b));
    types.push_back(1);
  }
  for (const char* t : {"he", "ll"}) {
    tokens.push_back(t);
    types.push_back(1);
  }
  for (const char* t : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    tokens.push_back(t);
    types.push_back(3);
  }
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "default");
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_int32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", {"h e", "l l"});
  w.add_uint32("tokenizer.ggml.bos_token_id", 258);
  w.add_uint32("tokenizer.ggml.eos_token_id", 260);
  w.add_string("tokenizer.chat_template",
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
               "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");
}

class WeightMaker {
 public:
  WeightMaker(uint32_t seed, std::string omit) : rng_(seed), omit_(std::move(omit)) {}

  // A [rows][cols] matrix (GGUF shape {cols, rows}) of uniform values in [-scale, scale].
  void matrix(GgufWriter& w, const std::string& name, int64_t rows, int64_t cols, kernels::DType type, float scale) {
    tensor(w, name, {cols, rows}, type, scale);
  }

  // `count` such matrices back to back (GGUF shape {cols, rows, count}), as MoE experts are stored.
  void stacked(GgufWriter& w, const std::string& name, int64_t count, int64_t rows, int64_t cols,
               kernels::DType type, float scale) {
    tensor(w, name, {cols, rows, count}, type, scale);
  }

  // A norm weight near 1.
  void norm(GgufWriter& w, const std::string& name, int64_t n) { vector(w, name, n, 1.0f, 0.2f); }
  // A bias around 0, large enough to matter.
  void bias(GgufWriter& w, const std::string& name, int64_t n) { vector(w, name, n, 0.0f, 0.5f); }

 private:
  void vector(GgufWriter& w, const std::string& name, int64_t n, float center, float spread) {
    std::vector<float> v(n);
    for (float& x : v) x = center + uniform(spread);
    if (name != omit_) w.add_tensor(name, {n}, kernels::DType::F32, v.data(), v.size() * sizeof(float));
  }

  void tensor(GgufWriter& w, const std::string& name, const std::vector<int64_t>& shape, kernels::DType type,
              float scale) {
    const int64_t cols = shape[0];
    int64_t rows = 1;
    for (size_t d = 1; d < shape.size(); ++d) rows *= shape[d];
    std::vector<float> row(cols);
    const size_t rb = kernels::row_bytes(type, cols);
    std::vector<uint8_t> bytes(rb * rows);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& x : row) x = uniform(scale);
      kernels::quantize_row(type, row.data(), bytes.data() + r * rb, cols);
    }
    if (name != omit_) w.add_tensor(name, shape, type, bytes.data(), bytes.size());
  }

  float uniform(float scale) { return std::uniform_real_distribution<float>(-scale, scale)(rng_); }
  std::mt19937 rng_;
  std::string omit_;
};

void ffn(GgufWriter& w, WeightMaker& m, const std::string& p, const TinyModelSpec& s) {
  const float in_scale = 1.0f / std::sqrt(float(s.dim)), down_scale = 1.0f / std::sqrt(float(s.ffn_dim));
  if (s.num_experts == 0) {
    m.matrix(w, p + "ffn_gate.weight", s.ffn_dim, s.dim, s.matrix_type, in_scale);
    m.matrix(w, p + "ffn_up.weight", s.ffn_dim, s.dim, s.matrix_type, in_scale);
    m.matrix(w, p + "ffn_down.weight", s.dim, s.ffn_dim, s.matrix_type, down_scale);
    return;
  }
  // A larger router scale spreads the logits so the top-k choice is decisive, not a near-tie.
  m.matrix(w, p + "ffn_gate_inp.weight", s.num_experts, s.dim, kernels::DType::F32, 4.0f * in_scale);
  m.stacked(w, p + "ffn_gate_exps.weight", s.num_experts, s.ffn_dim, s.dim, s.matrix_type, in_scale);
  m.stacked(w, p + "ffn_up_exps.weight", s.num_experts, s.ffn_dim, s.dim, s.matrix_type, in_scale);
  m.stacked(w, p + "ffn_down_exps.weight", s.num_experts, s.dim, s.ffn_dim, s.matrix_type, down_scale);
}

}  // namespace

void write_tiny_model(const std::string& path, const TinyModelSpec& s) {
  GgufWriter w;
  const std::string a = s.arch + ".";
  w.add_string("general.architecture", s.arch);
  w.add_string("general.name", "tiny-test");
  w.add_uint32(a + "block_count", s.num_layers);
  w.add_uint32(a + "embedding_length", s.dim);
  w.add_uint32(a + "feed_forward_length", s.ffn_dim);
  w.add_uint32(a + "attention.head_count", s.num_heads);
  w.add_uint32(a + "attention.head_count_kv", s.num_kv_heads);
  w.add_uint32(a + "context_length", s.context_len);
  w.add_uint32(a + "vocab_size", kTinyVocab);
  w.add_float32(a + "rope.freq_base", s.rope_theta);
  w.add_float32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (s.arch == "gemma3" || s.windowed_llama) w.add_uint32(a + "attention.sliding_window", s.sliding_window);
  if (s.arch == "granite") {  // multipliers far enough from 1 (and 1/sqrt(head_dim)) to matter
    w.add_float32(a + "embedding_scale", 3.0f);
    w.add_float32(a + "residual_scale", 0.5f);
    w.add_float32(a + "attention.scale", 0.2f);
    w.add_float32(a + "logit_scale", 4.0f);
  }
  if (s.pooling_type >= 0) w.add_uint32(a + "pooling_type", uint32_t(s.pooling_type));
  if (s.num_experts > 0) {
    w.add_uint32(a + "expert_count", s.num_experts);
    w.add_uint32(a + "expert_used_count", s.experts_used);
  }
  add_vocab(w);

  const int32_t head_dim = s.dim / s.num_heads;
  const int32_t kv_dim = s.num_kv_heads * head_dim;
  const float in_scale = 1.0f / std::sqrt(float(s.dim));
  WeightMaker m(s.seed, s.omit_tensor);
  m.matrix(w, "token_embd.weight", kTinyVocab, s.dim, s.embd_type, 1.0f);
  m.norm(w, "output_norm.weight", s.dim);
  if (!s.tied_embeddings) m.matrix(w, "output.weight", kTinyVocab, s.dim, s.matrix_type, in_scale);
  for (int32_t i = 0; i < s.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    m.norm(w, p + "attn_norm.weight", s.dim);
    m.norm(w, p + "ffn_norm.weight", s.dim);
    m.matrix(w, p + "attn_q.weight", s.dim, s.dim, s.matrix_type, in_scale);
    m.matrix(w, p + "attn_k.weight", kv_dim, s.dim, s.matrix_type, in_scale);
    m.matrix(w, p + "attn_v.weight", kv_dim, s.dim, s.matrix_type, in_scale);
    m.matrix(w, p + "attn_output.weight", s.dim, s.dim, s.matrix_type, in_scale);
    if (s.arch == "qwen2") {
      m.bias(w, p + "attn_q.bias", s.dim);
      m.bias(w, p + "attn_k.bias", kv_dim);
      m.bias(w, p + "attn_v.bias", kv_dim);
    }
    if (s.arch == "qwen3" || s.arch == "gemma3") {
      m.norm(w, p + "attn_q_norm.weight", head_dim);
      m.norm(w, p + "attn_k_norm.weight", head_dim);
    }
    if (s.arch == "gemma3") {
      m.norm(w, p + "post_attention_norm.weight", s.dim);
      m.norm(w, p + "post_ffw_norm.weight", s.dim);
    }
    if (!s.extra_tensor.empty()) m.norm(w, p + s.extra_tensor, head_dim);
    ffn(w, m, p, s);
  }
  w.write(path);
}

std::string temp_model_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path() / "flashserve-tests";
  std::filesystem::create_directories(dir);
  return (dir / (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".gguf")).string();
}

std::unique_ptr<Model> load_tiny_model(const TinyModelSpec& spec, const std::string& stem) {
  const std::string path = temp_model_path(stem);
  write_tiny_model(path, spec);
  return Model::load(path);
}

}  // namespace flashserve::test
