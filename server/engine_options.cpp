#include "server/engine_options.h"

#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "model/runner_factory.h"
#include "server/memory_budget.h"

namespace flashserve {

void EngineOptions::add_to(CLI::App& app) {
  app.add_option("--kv-cache-bytes", kv_cache_bytes, "KV cache size in bytes (default: --kv-cache-fraction of free memory)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--kv-cache-fraction", kv_cache_fraction,
                 "Fraction of available memory (MemAvailable, or the cgroup's limit when tighter) for the KV cache")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--block-size", block_size, "KV cache block size in tokens")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--max-num-seqs", max_num_seqs, "Most requests running at once")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-num-batched-tokens", max_num_batched_tokens, "Most tokens per engine step (longer prompts are chunked)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-waiting", max_waiting,
                 "Requests accepted but not yet started beyond this are refused as overload (429)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-step-ms", max_step_ms,
                 "While requests stream tokens, cut engine steps (prompt chunks) to what the measured step cost "
                 "fits in this many milliseconds; 0: never cut below --max-num-batched-tokens")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-step-ratio", max_step_ratio,
                 "While requests stream tokens, also cut steps that carry prompt chunks to what fits in this many "
                 "decode-only steps (by the measured step cost), so a small model's streams are not held for "
                 "several decode steps at a time; 0: no such cut")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-queue-time", max_queue_time_s,
                 "Seconds a request may wait to start before it is dropped as overload (429); 0: no limit")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_flag("--no-prefix-caching", no_prefix_caching, "Turn off automatic prefix caching");
  app.add_flag("--priority-scheduling", priority_scheduling, "Serve by request priority, then arrival (default: arrival)");
  app.add_option("--device", device, "Where the model runs: cpu, cuda, or auto (cuda when a GPU is visible)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--gpu-memory-fraction", gpu_memory_fraction,
                 "cuda: share of GPU memory for weights, activations and the KV cache (which gets the rest)")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "KV cache element type: f16, bf16 (cuda), f32 (cpu, exact), q8_0 (cpu: blocks of 32 8-bit "
                 "values with a scale, about half of f16's bytes) or fp8 (alias fp8_e4m3: one byte a value, "
                 "half of f16's bytes; the choice on cuda)")
      ->check(CLI::IsMember({"f16", "bf16", "f32", "q8_0", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
  app.add_option("--reasoning-parser", reasoning_parser,
                 "Reasoning models: split <think>...</think> off the answer as reasoning_content: auto (when the "
                 "chat template writes those tags), think (always; qwen3 and deepseek_r1 name it too) or none")
      ->check(CLI::IsMember({"auto", "think", "qwen3", "deepseek_r1", "none"}))
      ->capture_default_str();
  app.add_option("--reasoning-budget", reasoning_budget,
                 "Reasoning tokens a request may spend before the end of its reasoning is forced (a request's "
                 "reasoning_budget overrides it; -1: no limit)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  app.add_option("--max-tokens-default", max_tokens_default,
                 "Tokens a request that sets no max_tokens may generate (0: a chat may fill the context window, a "
                 "completion gets OpenAI's 16)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--chat-template", chat_template_file, "Jinja chat template file used instead of the model's own")
      ->check(CLI::ExistingFile);
  app.add_option("--cpu-activations", cpu_activations,
                 "cpu: q8 quantizes activations to 8 bits for integer dots with quantized weights (as "
                 "llama.cpp does; Q4_0/Q4_1/Q8_0 matrices are packed at load, a second copy in memory); "
                 "f32 keeps them exact and reads weights in place (the reference)")
      ->check(CLI::IsMember({"q8", "f32"}))
      ->capture_default_str();
  app.add_option("--speculative", speculative,
                 "Speculative decoding without a draft model: ngram drafts from the request's own prompt and output "
                 "(prompt lookup), suffix also from recent outputs; output tokens are unchanged (a request's "
                 "\"speculative\" field overrides it)")
      ->check(CLI::IsMember({"off", "ngram", "suffix"}))
      ->capture_default_str();
  app.add_option("--num-speculative-tokens", num_speculative_tokens,
                 "Most draft tokens one sequence has verified per step (fewer while its drafts miss)")
      ->check(CLI::Range(1, kMaxSpeculativeTokens))
      ->capture_default_str();
  app.add_flag("--no-cuda-graphs", no_cuda_graphs, "cuda: launch decode steps kernel by kernel instead of replaying graphs");
  app.add_flag("--batch-invariant", batch_invariant,
               "cuda: a request's tokens are the same alone as in any batch (GEMV for every matmul, one attention "
               "kernel for prefill and decode; slower for large batches and long contexts). The CPU always is");
}

EngineConfig EngineOptions::engine_config() const {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  c.scheduler.priority_scheduling = priority_scheduling;
  c.max_waiting = max_waiting;
  c.max_queue_time = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(max_queue_time_s));
  c.enable_prefix_caching = !no_prefix_caching;
  c.max_step_seconds = max_step_ms / 1000.0;
  c.max_step_decode_ratio = max_step_ratio;
  c.scheduler.speculative.method = *parse_speculative_method(speculative);
  c.scheduler.speculative.num_speculative_tokens = num_speculative_tokens;
  return c;
}

ChatTemplate EngineOptions::chat_template(const Model& model) const {
  if (chat_template_file.empty()) return model.chat_template();
  return model.chat_template_from(chat_template_file);
}

std::unique_ptr<ModelRunner> EngineOptions::make_runner(const Model& model) const {
  RunnerOptions o;
  o.device = device;
  o.block_size = block_size;
  o.max_num_seqs = max_num_seqs;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.kv_cache_bytes = kv_cache_bytes;
  o.kv_cache_fraction = kv_cache_fraction;
  if (kv_cache_bytes <= 0) {
    const MemoryBudget memory = available_memory();
    o.host_memory_available = memory.bytes;
    spdlog::info("host memory available: {} MiB ({})", memory.bytes >> 20, memory.source);
  }
  o.gpu_memory_fraction = gpu_memory_fraction;
  o.kv_dtype = kv_cache_dtype;
  o.cuda_graphs = !no_cuda_graphs;
  o.batch_invariant = batch_invariant;
  o.cpu_q8_activations = cpu_activations == "q8";
  return flashserve::make_runner(model, o);
}

}  // namespace flashserve
