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

void rope(Vec& x, int heads, int head_dim, int rot_dim, int pos, double theta, double freq_scale) {
  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < rot_dim / 2; ++i) {
      const double angle = pos * freq_scale * std::pow(theta, -2.0 * i / rot_dim);
      double& a = x[h * head_dim + 2 * i];
      double& b = x[h * head_dim + 2 * i + 1];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = a0 * std::sin(angle) + b0 * std::cos(angle);
    }
  }
}

struct Layer {
  Vec attn_norm, ffn_norm;
  Mat wq, wk, wv, wo, gate, up, down;
};

// Causal attention of the last query over all keys so far.
Vec attend(const Vec& q, const Mat& keys, const Mat& values, const ModelConfig& c) {
  const int group = c.num_heads / c.num_kv_heads;
  Vec out(q.size(), 0.0);
  for (int h = 0; h < c.num_heads; ++h) {
    const int kvh = h / group;
    Vec s(keys.size());
    for (size_t j = 0; j < keys.size(); ++j) {
      double d = 0;
      for (int i = 0; i < c.head_dim; ++i) d += q[h * c.head_dim + i] * keys[j][kvh * c.head_dim + i];
      s[j] = d / std::sqrt(double(c.head_dim));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (size_t j = 0; j < keys.size(); ++j) {
      for (int i = 0; i < c.head_dim; ++i) out[h * c.head_dim + i] += s[j] / sum * values[j][kvh * c.head_dim + i];
    }
  }
  return out;
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
    w.layers[i] = {load(f, p + "attn_norm.weight")[0], load(f, p + "ffn_norm.weight")[0], load(f, p + "attn_q.weight"),
                   load(f, p + "attn_k.weight"), load(f, p + "attn_v.weight"), load(f, p + "attn_output.weight"),
                   load(f, p + "ffn_gate.weight"), load(f, p + "ffn_up.weight"), load(f, p + "ffn_down.weight")};
  }
}

ReferenceLlama::~ReferenceLlama() = default;

std::vector<std::vector<double>> ReferenceLlama::logits(const std::vector<int32_t>& tokens) const {
  const ModelConfig& c = w_->c;
  std::vector<Mat> keys(c.num_layers), values(c.num_layers);
  std::vector<std::vector<double>> logits;
  for (size_t pos = 0; pos < tokens.size(); ++pos) {
    Vec x = w_->embd[tokens[pos]];
    for (int li = 0; li < c.num_layers; ++li) {
      const Layer& l = w_->layers[li];
      Vec h = rmsnorm(x, l.attn_norm, c.rms_eps);
      Vec q = matvec(l.wq, h), k = matvec(l.wk, h);
      rope(q, c.num_heads, c.head_dim, c.rope_dim, int(pos), c.rope_theta, c.rope_freq_scale);
      rope(k, c.num_kv_heads, c.head_dim, c.rope_dim, int(pos), c.rope_theta, c.rope_freq_scale);
      keys[li].push_back(k);
      values[li].push_back(matvec(l.wv, h));
      const Vec o = matvec(l.wo, attend(q, keys[li], values[li], c));
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      h = rmsnorm(x, l.ffn_norm, c.rms_eps);
      Vec g = matvec(l.gate, h);
      const Vec u = matvec(l.up, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const Vec d = matvec(l.down, g);
      for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    }
    logits.push_back(matvec(w_->out_w, rmsnorm(x, w_->out_norm, c.rms_eps)));
  }
  return logits;
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
