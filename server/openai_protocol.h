// OpenAI request parsing and error bodies, kept apart from HTTP plumbing so the rules read in one
// place: wrong JSON types are refused here with a 400 naming the field; value ranges are checked
// by the engine (`validate`), whose message goes back verbatim.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <nlohmann/json.hpp>
#include "server/openai_tools.h"
#include "server/serving.h"

namespace flashserve {

// Ordered: a JSON Schema's properties are generated in the order the client wrote them.
using json = nlohmann::ordered_json;

// An error for the client: HTTP status and OpenAI's error fields.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type, std::string param = "", std::string code = "")
      : std::runtime_error(message), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
  int retry_after_s = 0;  // > 0: sent as Retry-After (429, 503)
};

ApiError bad_request(const std::string& message, const std::string& param = "", const std::string& code = "");
// {"error": {"message", "type", "param", "code"}}, with nulls for empty param/code.
json error_body(const ApiError& e);
// The error a refused or failed request deserves: invalid or too long -> 400, overloaded -> 429,
// shutting down -> 503 (both with Retry-After), deadline -> 504, our bug -> 500.
ApiError api_error(const RequestError& e);
// The reason a refusal is counted under in the metrics (see ServingObserver::on_rejected).
std::string_view rejection_reason(const ApiError& e);

// A field's value; absent and null both mean "not given", as the OpenAI API treats them.
const json* field(const json& obj, const char* key);
// 400 (param `param`) naming the first key of `obj`, an object at `where`, not among `keys`.
void only_keys(const json& obj, const std::set<std::string_view>& keys, const std::string& where,
               const std::string& param);

// The body as a JSON object; malformed JSON or a non-object -> 400.
json parse_body(const std::string& body);
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
  bool stream = false;
  bool include_usage = false;                 // stream_options.include_usage
  bool logprobs = false;                      // report logprobs (top params.logprobs alternatives)
  std::optional<ToolCalling> tools;           // chat: the functions offered, and how (none with tool_choice none)

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
std::vector<int32_t> chat_prompt_ids(const json& messages, const Serving& serving, const json& tools = nullptr);

// POST /tokenize: {prompt, add_special_tokens} or {messages} -> prompt ids.
std::vector<int32_t> parse_tokenize_request(const json& body, const Serving& serving);
// POST /detokenize: {tokens} -> ids, each checked against the vocabulary.
std::vector<int32_t> parse_detokenize_request(const json& body, const Serving& serving);

// The engine parameters of choice `choice` (prompt choice / n): its max_tokens, and seed + i.
SamplingParams params_for(const GenerationRequest& r, int32_t choice, int32_t max_model_len);
// Every choice of `r`, ready for Serving::submit.
ServingRequest serving_request(const GenerationRequest& r, int32_t max_model_len);

}  // namespace flashserve
