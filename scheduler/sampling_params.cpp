#include "scheduler/sampling_params.h"

#include <cmath>
#include <sstream>

namespace flashserve {
namespace {

// "<what> must be <rule>, got <value>": the API layer returns this verbatim to the client.
template <typename T>
std::string must_be(const std::string& what, const char* rule, const T& value) {
  std::ostringstream os;
  os << what << " must be " << rule << ", got " << value;
  return os.str();
}

// The NaN-safe way to state a range: every comparison with NaN is false, so NaN fails the test.
bool in_closed(float v, float lo, float hi) { return v >= lo && v <= hi; }

std::optional<std::string> check_scalars(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f && std::isfinite(p.temperature))) {
    return must_be("temperature", "finite and >= 0", p.temperature);
  }
  if (p.top_k < 0) return must_be("top_k", ">= 0 (0 disables it)", p.top_k);
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return must_be("top_p", "in (0, 1]", p.top_p);
  if (!in_closed(p.min_p, 0.0f, 1.0f)) return must_be("min_p", "in [0, 1]", p.min_p);
  if (!(p.repetition_penalty > 0.0f && std::isfinite(p.repetition_penalty))) {
    return must_be("repetition_penalty", "finite and > 0", p.repetition_penalty);
  }
  if (!in_closed(p.presence_penalty, -2.0f, 2.0f)) {
    return must_be("presence_penalty", "in [-2, 2]", p.presence_penalty);
  }
  if (!in_closed(p.frequency_penalty, -2.0f, 2.0f)) {
    return must_be("frequency_penalty", "in [-2, 2]", p.frequency_penalty);
  }
  if (p.logprobs < -1 || p.logprobs > 20) return must_be("logprobs", "in [-1, 20]", p.logprobs);
  if (p.max_tokens < 1) return must_be("max_tokens", ">= 1", p.max_tokens);
  return std::nullopt;
}

std::string vocab_rule(int32_t vocab_size) { return "in [0, " + std::to_string(vocab_size) + ")"; }

std::optional<std::string> check_reasoning_budget(const SamplingParams& p, int32_t vocab_size) {
  if (!p.reasoning_budget) return std::nullopt;
  const ReasoningBudget& b = *p.reasoning_budget;
  if (b.max_tokens < 0) return must_be("the reasoning budget", ">= 0", b.max_tokens);
  if (p.grammar) return "a reasoning budget cannot be combined with a grammar (response_format, tools)";
  if (b.vocab_size != vocab_size) return must_be("the reasoning budget's vocabulary", "the model's", b.vocab_size);
  if (b.close_ids.empty()) return "the reasoning budget needs the tokens of its close tag";
  for (const std::vector<int32_t>* list : {&b.open_ids, &b.close_ids}) {
    for (int32_t id : *list) {
      if (id < 0 || id >= vocab_size) return must_be("a reasoning tag token", vocab_rule(vocab_size).c_str(), id);
    }
  }
  return std::nullopt;
}

std::optional<std::string> check_token_lists(const SamplingParams& p, int32_t vocab_size) {
  const std::string ids = vocab_rule(vocab_size);
  for (const auto& [name, size] : {std::pair{"logit_bias", p.logit_bias.size()}, {"stop_token_ids", p.stop_token_ids.size()}}) {
    if (size > kMaxTokenListSize) {
      return std::string(name) + " may hold at most " + std::to_string(kMaxTokenListSize) + " entries, got " +
             std::to_string(size);
    }
  }
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= vocab_size) return must_be("logit_bias token id", ids.c_str(), id);
    if (!in_closed(bias, -100.0f, 100.0f)) {
      return must_be("logit_bias[" + std::to_string(id) + "]", "in [-100, 100]", bias);
    }
  }
  for (int32_t id : p.stop_token_ids) {
    if (id < 0 || id >= vocab_size) return must_be("stop_token_ids entry", ids.c_str(), id);
  }
  return check_reasoning_budget(p, vocab_size);
}

std::optional<std::string> check_stop_strings(const SamplingParams& p) {
  if (p.stop.size() > kMaxStopStrings) {
    return "stop must hold at most " + std::to_string(kMaxStopStrings) + " strings, got " + std::to_string(p.stop.size());
  }
  for (const std::string& s : p.stop) {
    if (s.empty()) return std::string("stop strings must not be empty");
    if (s.size() > kMaxStopBytes) {
      return "stop strings must be at most " + std::to_string(kMaxStopBytes) + " bytes, got " + std::to_string(s.size());
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> validate(const SamplingParams& p, int32_t vocab_size) {
  if (auto err = check_scalars(p)) return err;
  // The grammar allows end of generation only where its text is complete; ignoring it would leave
  // nothing to sample but end-of-generation tokens until max_tokens.
  if (p.grammar && p.ignore_eos) return std::string("ignore_eos cannot be combined with a grammar or response_format");
  if (auto err = check_token_lists(p, vocab_size)) return err;
  return check_stop_strings(p);
}

}  // namespace flashserve
