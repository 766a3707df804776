// OpenAI request parsing (the error type and JSON helpers: openai_json.h), kept apart from HTTP plumbing so the rules read in one
// place: wrong JSON types are refused here with a 400 naming the field; value ranges are checked
// by the engine (`validate`), whose message goes back verbatim.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "server/openai_json.h"
#include "server/openai_tools.h"
#include "server/reasoning_splitter.h"
#include "server/serving.h"

namespace flashserve {

// The error a refused or failed request deserves: invalid or too long -> 400, overloaded -> 429,
// shutting down -> 503 (both with Retry-After), deadline -> 504, our bug -> 500.
ApiError api_error(const RequestError& e);
// The reason a refusal is counted under in the metrics (see ServingObserver::on_rejected).
std::string_view rejection_reason(const ApiError& e);

// A missing "model" means the served one; any other name -> 404 model_not_found.
void check_model(const json& body, const std::string& served_name);

enum class Endpoint { Completions, Chat };

// One /v1/completions or /v1/chat/completions request, tokenized and ready to submit.
struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts;  // chat: exactly one
  SamplingParams params;                      // max_tokens filled per prompt by params_for
  // Unset: 16 for completions (OpenAI's default), the rest of the context window for chat.
  std::optional<int32_t> max_tokens;
  int32_t n = 1;                              // choices per prompt
  int32_t priority = 0;
  SpeculativeOverride speculative;
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  bool logprobs = false;                      // report logprobs (top params.logprobs alternatives)
  std::optional<ToolCalling> tools;           // chat: the functions offered, and how (none with tool_choice none)
  std::optional<ReasoningMode> reasoning;     // chat with a reasoning model: the output's reasoning split off
  std::optional<Pooling> pooling;             // embeddings: each prompt pooled, nothing generated

  int32_t num_choices() const { return int32_t(prompts.size()) * n; }
};

// A constraint (response_format, grammar, regex, a forced tool call) is compiled here, within its
// budget; `cancelled` stops that compile early (503), e.g. once the client has gone.
GenerationRequest parse_completion_request(const json& body, const Serving& serving,
                                           const std::function<bool()>& cancelled = {});
GenerationRequest parse_chat_request(const json& body, const Serving& serving,
                                     const std::function<bool()>& cancelled = {});
// Chat messages ([{role, content}], content a string or text parts; assistant tool_calls, tool
// results) and the tools offered (null for none) -> prompt ids (400 on misuse).
// `template_kwargs`: chat_template_kwargs, checked.
std::vector<int32_t> chat_prompt_ids(const json& messages, const Serving& serving, const json& tools = nullptr,
                                     const json& template_kwargs = json::object());

// POST /tokenize: {prompt, add_special_tokens} or {messages} -> prompt ids.
std::vector<int32_t> parse_tokenize_request(const json& body, const Serving& serving);
// POST /detokenize: {tokens} -> ids, each checked against the vocabulary.
std::vector<int32_t> parse_detokenize_request(const json& body, const Serving& serving);

// The engine parameters of choice `choice` (prompt choice / n): its max_tokens (the request's, else
// the default: max_tokens_default when > 0, capped for a chat by what the context window has left),
// and seed + i.
SamplingParams params_for(const GenerationRequest& r, int32_t choice, int32_t max_model_len, int32_t max_tokens_default);
// Every choice of `r` as an engine request, ready for Serving::submit (arrival left to the caller).
std::vector<GenerateRequest> engine_requests(const GenerationRequest& r, int32_t max_model_len,
                                             int32_t max_tokens_default);

}  // namespace flashserve
