#include "tests/util/reference_llama.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/gguf.h"
#include "model/model_config.h"

namespace flashserve::test {
namespace {

using Vec = std::vector<double>;
using Mat = std::vector<Vec>;  // [rows][cols]

// A GGUF {cols, rows} tensor as double rows.
Mat load(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find_tensor(name);
  const int64_t cols = t->shape[0];
  const int64_t rows = t->num_elements() / cols;
  const size_t rb = kernels::row_bytes(t->type, cols);
  std::vector<float> tmp(cols);
  Mat m(rows);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(t->type, static_cast<const char*>(t->data) + r * rb, tmp.data(), cols);
    m[r].assign(tmp.begin(), tmp.end());
  }
  return m;
}

// A GGUF {cols, rows, count} tensor as `count` matrices.
std::vector<Mat> load_stacked(const GgufFile& f, const std::string& name) {
  const Mat all = load(f, name);
  const size_t count = size_t(f.find_tensor(name)->shape[2]), rows = all.size() / count;
  std::vector<Mat> out(count);
  for (size_t e = 0; e < count; ++e) out[e].assign(all.begin() + e * rows, all.begin() + (e + 1) * rows);
  return out;
}

Vec matvec(const Mat& w, const Vec& x) {
  Vec y(w.size(), 0.0);
  for (size_t o = 0; o < w.size(); ++o) {
    for (size_t k = 0; k < x.size(); ++k) y[o] += w[o][k] * x[k];
  }
  return y;
}

Vec rmsnorm(const Vec& x, const Vec& w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
  return y;
}

// Pair i rotates dims (2i, 2i + 1), or (i, i + rot_dim / 2) in the neox layout.
// Gemma 3's local layers use their own base and no scaling (Mistral's, the model's).
void rope(Vec& x, int heads, int head_dim, int pos, const ModelConfig& c, bool local) {
  const int rot_dim = c.rope_dim;
  const bool own = local && c.rope_theta_local > 0;
  const double theta = own ? c.rope_theta_local : c.rope_theta, scale = own ? 1.0 : c.rope_freq_scale;
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < rot_dim / 2; ++i) {
      const double angle = pos * scale * std::pow(theta, -2.0 * i / rot_dim);
      double& a = x[h * head_dim + (c.rope_neox ? i : 2 * i)];
      double& b = x[h * head_dim + (c.rope_neox ? i + rot_dim / 2 : 2 * i + 1)];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = a0 * std::sin(angle) + b0 * std::cos(angle);
    }
  }
}

void add(Vec& x, const Vec& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

// Each head's slice normalised on its own (no-op without a norm weight).
void norm_heads(Vec& x, const Vec& w, const ModelConfig& c) {
  if (w.empty()) return;
  for (size_t h = 0; h < x.size() / size_t(c.head_dim); ++h) {
    const Vec head(x.begin() + h * c.head_dim, x.begin() + (h + 1) * c.head_dim);
    const Vec n = rmsnorm(head, w, c.rms_eps);
    std::copy(n.begin(), n.end(), x.begin() + h * c.head_dim);
  }
}

struct Expert {
  Mat gate, up, down;
};

struct Layer {
  Vec attn_norm, ffn_norm;
  Vec bq, bk, bv;      // Qwen2: empty when absent
  Vec q_norm, k_norm;  // Qwen3, Gemma 3: empty when absent
  Vec post_attn_norm, post_ffn_norm;  // Gemma 3: empty when absent
  Mat wq, wk, wv, wo;
  Expert dense;                 // unused in MoE models
  Mat router;                   // MoE only: [num_experts][dim]
  std::vector<Expert> experts;  // MoE only
};

// SwiGLU, or GeGLU with the tanh approximation of gelu (Gemma).
Vec gated_mlp(const Expert& w, const Vec& h, bool gelu) {
  Vec g = matvec(w.gate, h);
  const Vec u = matvec(w.up, h);
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = g[i];
    g[i] = (gelu ? 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)))
                 : x / (1.0 + std::exp(-x))) * u[i];
  }
  return matvec(w.down, g);
}

// Softmax over all experts, the top_k best (higher probability, lower id on ties), their
// probabilities renormalised to sum to 1, as Mixtral does.
Vec moe_mlp(const Layer& l, const Vec& h, int top_k) {
  Vec p = matvec(l.router, h);
  const double mx = *std::max_element(p.begin(), p.end());
  for (double& v : p) v = std::exp(v - mx);
  std::vector<int> order(p.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = int(e);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  double chosen = 0;
  for (int j = 0; j < top_k; ++j) chosen += p[order[j]];
  Vec out(h.size(), 0.0);
  for (int j = 0; j < top_k; ++j) {
    const Vec y = gated_mlp(l.experts[order[j]], h, false);
    for (size_t i = 0; i < out.size(); ++i) out[i] += p[order[j]] / chosen * y[i];
  }
  return out;
}

// Causal attention of the last query over the keys so far (only the last `window` when > 0).
Vec attend(const Vec& q, const Mat& keys, const Mat& values, const ModelConfig& c, int window) {
  const int group = c.num_heads / c.num_kv_heads;
  const size_t first = window > 0 && keys.size() > size_t(window) ? keys.size() - size_t(window) : 0;
  Vec out(q.size(), 0.0);
  for (int h = 0; h < c.num_heads; ++h) {
    const int kvh = h / group;
    Vec s(keys.size(), -INFINITY);
    for (size_t j = first; j < keys.size(); ++j) {
      double d = 0;
      for (int i = 0; i < c.head_dim; ++i) d += q[h * c.head_dim + i] * keys[j][kvh * c.head_dim + i];
      s[j] = d * (c.attention_scale > 0 ? double(c.attention_scale) : 1.0 / std::sqrt(double(c.head_dim)));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (size_t j = first; j < keys.size(); ++j) {
      for (int i = 0; i < c.head_dim; ++i) out[h * c.head_dim + i] += s[j] / sum * values[j][kvh * c.head_dim + i];
    }
  }
  return out;
}

void load_experts(const GgufFile& f, const std::string& p, Layer& l) {
  l.router = load(f, p + "ffn_gate_inp.weight");
  const auto gate = load_stacked(f, p + "ffn_gate_exps.weight"), up = load_stacked(f, p + "ffn_up_exps.weight"),
             down = load_stacked(f, p + "ffn_down_exps.weight");
  for (size_t e = 0; e < gate.size(); ++e) l.experts.push_back({gate[e], up[e], down[e]});
}

}  // namespace

struct ReferenceLlama::Weights {
  ModelConfig c;
  Mat embd, out_w;
  Vec out_norm;
  std::vector<Layer> layers;
};

ReferenceLlama::ReferenceLlama(const GgufFile& f) : w_(std::make_unique<Weights>()) {
  Weights& w = *w_;
  w.c = read_model_config(f);
  w.embd = load(f, "token_embd.weight");
  w.out_w = f.find_tensor("output.weight") ? load(f, "output.weight") : w.embd;
  w.out_norm = load(f, "output_norm.weight")[0];
  w.layers.resize(w.c.num_layers);
  for (int i = 0; i < w.c.num_layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    Layer& l = w.layers[i];
    l.attn_norm = load(f, p + "attn_norm.weight")[0];
    l.ffn_norm = load(f, p + "ffn_norm.weight")[0];
    l.wq = load(f, p + "attn_q.weight");
    l.wk = load(f, p + "attn_k.weight");
    l.wv = load(f, p + "attn_v.weight");
    l.wo = load(f, p + "attn_output.weight");
    if (f.find_tensor(p + "attn_q.bias")) {
      l.bq = load(f, p + "attn_q.bias")[0];
      l.bk = load(f, p + "attn_k.bias")[0];
      l.bv = load(f, p + "attn_v.bias")[0];
    }
    if (f.find_tensor(p + "attn_q_norm.weight")) {
      l.q_norm = load(f, p + "attn_q_norm.weight")[0];
      l.k_norm = load(f, p + "attn_k_norm.weight")[0];
    }
    if (f.find_tensor(p + "post_attention_norm.weight")) {
      l.post_attn_norm = load(f, p + "post_attention_norm.weight")[0];
      l.post_ffn_norm = load(f, p + "post_ffw_norm.weight")[0];
    }
    if (w.c.is_moe()) {
      load_experts(f, p, l);
    } else {
      l.dense = {load(f, p + "ffn_gate.weight"), load(f, p + "ffn_up.weight"), load(f, p + "ffn_down.weight")};
    }
  }
}

ReferenceLlama::~ReferenceLlama() = default;

std::vector<std::vector<double>> ReferenceLlama::logits(const std::vector<int32_t>& tokens) const {
  std::vector<std::vector<double>> logits;
  for (const Vec& h : hidden_states(tokens)) {
    Vec out = matvec(w_->out_w, h);
    for (double& v : out) v *= w_->c.logit_multiplier;
    logits.push_back(out);
  }
  return logits;
}

std::vector<std::vector<double>> ReferenceLlama::hidden_states(const std::vector<int32_t>& tokens) const {
  const ModelConfig& c = w_->c;
  std::vector<Mat> keys(c.num_layers), values(c.num_layers);
  std::vector<std::vector<double>> hidden;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x = w_->embd[tokens[pos]];
    for (double& v : x) v *= c.embed_scale;
    for (int li = 0; li < c.num_layers; ++li) {
      const Layer& l = w_->layers[li];
      const bool local = c.is_local_layer(li);
      Vec h = rmsnorm(x, l.attn_norm, c.rms_eps);
      Vec q = matvec(l.wq, h), k = matvec(l.wk, h), v = matvec(l.wv, h);
      add(q, l.bq);
      add(k, l.bk);
      add(v, l.bv);
      norm_heads(q, l.q_norm, c);
      norm_heads(k, l.k_norm, c);
      rope(q, c.num_heads, c.head_dim, int(pos), c, local);
      rope(k, c.num_kv_heads, c.head_dim, int(pos), c, local);
      keys[li].push_back(k);
      values[li].push_back(v);
      Vec o = matvec(l.wo, attend(q, keys[li], values[li], c, local ? c.sliding_window : 0));
      if (!l.post_attn_norm.empty()) o = rmsnorm(o, l.post_attn_norm, c.rms_eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] += c.residual_scale * o[i];
      h = rmsnorm(x, l.ffn_norm, c.rms_eps);
      Vec d = c.is_moe() ? moe_mlp(l, h, c.num_experts_used) : gated_mlp(l.dense, h, c.geglu);
      if (!l.post_ffn_norm.empty()) d = rmsnorm(d, l.post_ffn_norm, c.rms_eps);
      for (size_t i = 0; i < x.size(); ++i) x[i] += c.residual_scale * d[i];
    }
    hidden.push_back(rmsnorm(x, w_->out_norm, c.rms_eps));
  }
  return hidden;
}

std::vector<std::vector<double>> reference_logits(const GgufFile& f, const std::vector<int32_t>& tokens) {
  return ReferenceLlama(f).logits(tokens);
}

double relative_error(const float* a, const std::vector<double>& b) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(double(a[i]) - b[i]));
    max_ref = std::max(max_ref, std::abs(b[i]));
  }
  return max_diff / max_ref;
}

}  // namespace flashserve::test
