// Engine and KV-cache flags shared by the commands that run the engine.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <CLI/CLI.hpp>
#include "model/model.h"
#include "model/model_runner.h"
#include "scheduler/engine.h"

namespace flashserve {

struct EngineOptions {
  int64_t kv_cache_bytes = 0;        // 0: kv_cache_fraction of available memory
  double kv_cache_fraction = 0.2;
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int32_t max_waiting = 1024;
  double max_queue_time_s = 60;
  double max_step_ms = 70;  // while tokens stream, cut steps to what fits this long (0: never)
  double max_step_ratio = 1.7;  // ...and to this many decode-only steps (0: never)
  bool no_prefix_caching = false;
  bool priority_scheduling = false;
  std::string device = "auto";       // auto: cuda when this build has it and a GPU is visible, else cpu
  double gpu_memory_fraction = 0.9;  // --device cuda: share of GPU memory for weights, activations, KV
  std::string kv_cache_dtype = "f16";  // f16; bf16 on cuda; f32 (exact, twice the bytes) or q8_0 (about half) on cpu
  bool no_cuda_graphs = false;
  bool batch_invariant = false;
  std::string cpu_activations = "q8";  // cpu: q8 (integer dots for quantized weights) or f32 (exact)
  std::string chat_template_file;    // a Jinja file used instead of the model's own template
  // What a request that sets no max_tokens may generate at most (0: a chat the rest of the context
  // window, a completion OpenAI's 16).
  int32_t max_tokens_default = 0;
  // Reasoning models: auto splits <think>...</think> off as reasoning_content when the chat
  // template writes those tags; think always; none never.
  std::string reasoning_parser = "auto";
  int32_t reasoning_budget = -1;  // reasoning tokens a request may spend by default (-1: no limit)
  std::string speculative = "off";   // off, ngram (prompt lookup) or suffix (also recent outputs)
  int32_t num_speculative_tokens = 7;  // K: the most drafts a sequence has verified in one step

  void add_to(CLI::App& app);
  EngineConfig engine_config() const;
  // --chat-template when given (an unreadable or invalid file throws), else the model's own.
  ChatTemplate chat_template(const Model& model) const;
  // The runner --device asks for (model/runner_factory.h), its KV pool from --kv-cache-bytes or a
  // share of the memory available (memory_budget.h). Throws std::invalid_argument for cuda in a
  // build without it, std::runtime_error when no GPU is visible.
  std::unique_ptr<ModelRunner> make_runner(const Model& model) const;
};

}  // namespace flashserve
