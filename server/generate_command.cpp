#include "server/generate_command.h"

#include <cstdio>

#include "model/model.h"
#include "model/model_runner.h"
#include "scheduler/output_processor.h"

namespace flashserve {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::vector<int32_t> encode_prompt(const Model& m, const EngineOptions& e, const std::string& prompt, bool chat) {
  if (!chat) return m.tokenizer().encode(prompt, true, false);
  return m.encode_chat(e.chat_template(m), {{"user", prompt}});
}

struct Generation {
  std::string text;
  RequestOutput last;
};

void report(const std::vector<Generation>& gens, Clock::time_point start) {
  if (gens.size() == 1) {
    const RequestOutput& o = gens[0].last;
    const double prefill = seconds(o.timings.first_token - o.timings.first_scheduled);
    const double decode = seconds(o.timings.finished - o.timings.first_token);
    std::fprintf(stderr, "prompt: %d tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s\n", o.num_prompt_tokens,
                 o.num_prompt_tokens / prefill, o.num_output_tokens,
                 o.num_output_tokens > 1 ? (o.num_output_tokens - 1) / decode : 0.0);
    return;
  }
  int64_t prompt_tokens = 0, output_tokens = 0;
  for (const Generation& g : gens) {
    prompt_tokens += g.last.num_prompt_tokens;
    output_tokens += g.last.num_output_tokens;
  }
  const double total = seconds(Clock::now() - start);
  std::fprintf(stderr, "%zu requests: %lld prompt + %lld generated tokens in %.2f s | %.1f generated tokens/s\n",
               gens.size(), (long long)prompt_tokens, (long long)output_tokens, total, output_tokens / total);
}

int generate(const GenerateOptions& o) {
  const auto model = Model::load(o.model_path);
  const auto runner = o.engine.make_runner(*model);
  Engine engine(*runner, model->tokenizer(), o.engine.engine_config());
  OutputProcessor outputs(engine, model->tokenizer());
  const bool stream = o.prompts.size() == 1;
  std::vector<Generation> gens(o.prompts.size());
  const auto start = Clock::now();
  for (size_t i = 0; i < o.prompts.size(); ++i) {
    GenerateRequest req{"prompt-" + std::to_string(i), encode_prompt(*model, o.engine, o.prompts[i], o.chat), o.sampling};
    // Cap max_tokens at what fits (context window and KV cache) rather than refuse outright.
    const int32_t room = engine.max_model_len() - int32_t(req.prompt_ids.size());
    req.params.max_tokens = std::max(1, std::min(req.params.max_tokens, room));
    Generation* g = &gens[i];
    const auto rejected = outputs.submit(std::move(req), [g, stream](const RequestOutput& out) {
      g->text += out.text;
      g->last = out;
      if (stream) {
        std::fputs(out.text.c_str(), stdout);
        std::fflush(stdout);
      }
    });
    if (rejected) throw std::invalid_argument("prompt " + std::to_string(i) + ": " + rejected->message);
  }
  while (engine.step()) {
  }
  outputs.flush();
  for (size_t i = 0; i < gens.size() && !stream; ++i) std::printf("=== prompt %zu ===\n%s\n", i, gens[i].text.c_str());
  if (stream) std::puts("");
  std::fflush(stdout);
  report(gens, start);
  return 0;
}

}  // namespace

GenerateOptions::GenerateOptions() {
  sampling.temperature = 0.0f;
  sampling.max_tokens = 256;
}

void GenerateOptions::add_to(CLI::App& app) {
  app.add_option("--model", model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  app.add_option("--prompt", prompts, "Prompt text; repeat for several prompts, run batched")->required();
  app.add_flag("--chat", chat, "Wrap each prompt in the model's chat template");
  app.add_option("--max-tokens", sampling.max_tokens, "Most tokens to generate per prompt")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--temperature", sampling.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "Sample from the k likeliest tokens (0: off)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", sampling.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0, 1.0));
  app.add_option("--min-p", sampling.min_p, "Drop tokens below min-p times the top token's probability")->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", sampling.seed, "Sampling seed");
  app.add_option("--stop", sampling.stop, "Stop string; repeatable");
  app.add_flag("--ignore-eos", sampling.ignore_eos, "Keep generating past end-of-sequence tokens");
  engine.add_to(app);
}

int run_generate(const GenerateOptions& o) {
  try {
    if (auto error = validate(o.sampling, 1 << 30)) throw std::invalid_argument(*error);
    return generate(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flashserve
