// Tiny random models of the Llama family, written as real GGUF files so tests exercise the real loader.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include "kernels/dtype.h"
#include "model/model.h"

namespace flashserve::test {

struct TinyModelSpec {
  // llama; qwen2 (adds Q/K/V biases, neox RoPE); qwen3 (adds per-head Q/K norms, neox RoPE);
  // gemma3 (Qwen3's additions, GeGLU, post-branch norms, scaled embeddings, local layers with a
  // sliding window of `sliding_window` positions)
  // granite (Llama's tensors, embedding, residual, attention and logit multipliers)
  // llama with `windowed_llama`: Mistral-style, every layer attends to its last `sliding_window`.
  std::string arch = "llama";
  int32_t sliding_window = 8;
  bool windowed_llama = false;
  int32_t num_layers = 2;
  int32_t dim = 64;
  int32_t ffn_dim = 128;
  int32_t num_heads = 4;
  int32_t num_kv_heads = 2;      // grouped-query attention by default
  int32_t context_len = 512;
  int32_t num_experts = 0;       // > 0: a mixture-of-experts FFN (router + stacked experts)
  int32_t experts_used = 0;      // top-k per token when num_experts > 0
  float rope_theta = 10000.0f;
  kernels::DType matrix_type = kernels::DType::F32;  // attention and MLP matrices
  kernels::DType embd_type = kernels::DType::F32;    // token embedding (and tied LM head)
  bool tied_embeddings = true;
  uint32_t seed = 1;
  std::string omit_tensor;  // leave this tensor out (to test load errors)
  std::string extra_tensor; // add blk.N.<this> to every layer, [head_dim] floats (to test load errors)
  int32_t pooling_type = -1;  // <arch>.pooling_type (1 mean, 2 cls, 3 last, 4 rank); -1: absent
};

// A byte-level gpt2 vocabulary: 256 byte tokens, two merges, three control tokens
// (<|endoftext|> = EOS, <|im_start|>, <|im_end|>), and a ChatML chat template.
constexpr int32_t kTinyVocab = 256 + 2 + 3;

// Writes the model to `path` (overwriting). Weights are random with a fixed seed.
void write_tiny_model(const std::string& path, const TinyModelSpec& spec);

// A fresh path under the test temp dir, unique per call.
std::string temp_model_path(const std::string& stem);

// The model written to a fresh temp_model_path(stem), loaded.
std::unique_ptr<Model> load_tiny_model(const TinyModelSpec& spec, const std::string& stem);

}  // namespace flashserve::test
