#include "server/generate_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>

#include "model/chat_template.h"
#include "model/llama_model.h"

namespace flashserve {
namespace {

using Clock = std::chrono::steady_clock;

// Greedy at temperature 0, else a draw from softmax(logits / temperature). (The scheduler's
// sampler, with top-k/p and penalties, takes over when the engine loop lands.)
int32_t sample(const float* logits, int32_t vocab, float temperature, std::mt19937_64& rng) {
  if (temperature <= 0.0f) return int32_t(std::max_element(logits, logits + vocab) - logits);
  const float mx = *std::max_element(logits, logits + vocab);
  std::vector<double> p(vocab);
  for (int32_t i = 0; i < vocab; ++i) p[i] = std::exp((logits[i] - mx) / temperature);
  return int32_t(std::discrete_distribution<int32_t>(p.begin(), p.end())(rng));
}

std::string format_prompt(const LlamaModel& m, const GenerateOptions& o) {
  if (!o.chat) return o.prompt;
  const Tokenizer& tok = m.tokenizer();
  const auto tmpl = ChatTemplate::from_source(m.chat_template_source(), tok.token_text(tok.bos_id()),
                                              tok.token_text(tok.eos_id()));
  return tmpl.apply({{"user", o.prompt}}, /*add_generation_prompt=*/true);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int generate(const GenerateOptions& o) {
  auto model = LlamaModel::load(o.model_path);
  const ModelConfig& cfg = model->config();
  const Tokenizer& tok = model->tokenizer();
  const std::string text = format_prompt(*model, o);
  // Templates of some families (Llama-2/3, Gemma) already render the BOS text; don't add a second.
  const bool has_bos = tok.bos_id() >= 0 && text.starts_with(tok.token_text(tok.bos_id()));
  const std::vector<int32_t> prompt = tok.encode(text, /*add_special=*/!has_bos, /*parse_special=*/o.chat);
  if (prompt.empty()) throw std::invalid_argument("the prompt encodes to no tokens");
  const int32_t total = std::min<int64_t>(cfg.context_len, int64_t(prompt.size()) + o.max_tokens);
  if (int32_t(prompt.size()) >= total) throw std::invalid_argument("the prompt fills the whole context window");

  KvCache cache(cfg, (total + o.block_size - 1) / o.block_size, o.block_size);
  SequenceInput seq;
  seq.block_table.resize(cache.num_blocks());
  std::iota(seq.block_table.begin(), seq.block_table.end(), 0);
  seq.token_ids = prompt;

  std::mt19937_64 rng(o.seed);
  StreamDecoder detok(tok);
  const auto t0 = Clock::now();
  ForwardOutput out = model->forward(ForwardBatch{{seq}}, cache);
  const double prefill_s = seconds_since(t0);
  int32_t generated = 0;
  const auto t1 = Clock::now();
  for (int32_t pos = int32_t(prompt.size()); pos < total; ++pos) {
    const int32_t next = sample(out.row(0), out.vocab_size, o.temperature, rng);
    ++generated;
    if (tok.is_end_of_generation(next)) break;
    std::fputs(detok.push(next).c_str(), stdout);
    std::fflush(stdout);
    if (pos + 1 == total) break;
    seq.num_computed_tokens = pos;
    seq.token_ids = {next};
    out = model->forward(ForwardBatch{{seq}}, cache);
  }
  std::fputs((detok.flush() + "\n").c_str(), stdout);
  std::fflush(stdout);
  const double decode_s = seconds_since(t1);
  std::fprintf(stderr, "prompt: %zu tokens, %.1f tokens/s | generated: %d tokens, %.1f tokens/s\n", prompt.size(),
               prompt.size() / prefill_s, generated, generated / decode_s);
  return 0;
}

}  // namespace

int run_generate(const GenerateOptions& o) {
  try {
    return generate(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace flashserve
