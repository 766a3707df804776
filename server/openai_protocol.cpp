#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string_view>

#include "server/openai_constraints.h"

namespace flashserve {
namespace {

constexpr int32_t kMaxChoices = 16;
constexpr int32_t kMaxLogprobs = 20;

// Every field each endpoint understands: OpenAI's, plus vLLM's sampling extensions. Anything else
// is refused by name rather than silently ignored. Fields listed but not implemented are checked
// by refuse_unsupported(): accepted only with a value that asks for nothing.
const std::set<std::string_view> kCommonFields = {
    "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "presence_penalty",
    "frequency_penalty", "logit_bias", "seed", "user",
    // vLLM's extensions
    "top_k", "min_p", "repetition_penalty", "ignore_eos", "stop_token_ids", "priority", "max_completion_tokens",
    // speculative decoding (scheduler/speculation.h): the server's method and K, or this request's own
    "speculative", "num_speculative_tokens",
    // structured output (openai_constraints.h): OpenAI's response_format, our grammar and regex
    "response_format", "grammar", "regex"};
const std::set<std::string_view> kCompletionFields = {"prompt", "logprobs", "echo", "suffix", "best_of"};
const std::set<std::string_view> kChatFields = {
    "messages", "logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
    "functions", "function_call", "store", "metadata", "service_tier", "modalities", "audio", "prediction",
    "reasoning_effort", "web_search_options", "prompt_cache_key", "safety_identifier", "verbosity",
    // reasoning models (vLLM's and our extensions)
    "chat_template_kwargs", "reasoning_budget"};

void refuse_unknown(const json& body, const std::set<std::string_view>& own) {
  for (const auto& [key, value] : body.items()) {
    if (!kCommonFields.count(key) && !own.count(key)) {
      throw bad_request("Unrecognized request argument supplied: " + key, key, "unsupported_parameter");
    }
  }
}

ApiError wrong_type(const std::string& key, const char* what) {
  return bad_request("'" + key + "' must be " + what, key);
}

std::optional<double> opt_number(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw wrong_type(key, "a number");
  return v->get<double>();
}

std::optional<float> opt_float(const json& obj, const char* key) {
  if (auto v = opt_number(obj, key)) return float(*v);
  return std::nullopt;
}

// Integers; an integral float like 10.0 passes too (as pydantic's lax mode lets it).
std::optional<int64_t> as_int(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::trunc(d) && std::abs(d) < 9.0e15) return int64_t(d);
  }
  return std::nullopt;
}

std::optional<int64_t> opt_int64(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (auto i = as_int(*v)) return i;
  throw wrong_type(key, "an integer");
}

std::optional<int32_t> opt_int(const json& obj, const char* key) {
  auto v = opt_int64(obj, key);
  if (!v) return std::nullopt;
  if (*v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    throw bad_request("'" + std::string(key) + "' is out of range", key);
  }
  return int32_t(*v);
}

std::optional<bool> opt_bool(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw wrong_type(key, "a boolean");
  return v->get<bool>();
}

std::optional<std::string> opt_string(const json& obj, const char* key) {
  const json* v = field(obj, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw wrong_type(key, "a string");
  return v->get<std::string>();
}

std::vector<int32_t> token_ids(const json& arr, const std::string& key) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (const json& e : arr) {
    const auto id = as_int(e);
    if (!id || *id < std::numeric_limits<int32_t>::min() || *id > std::numeric_limits<int32_t>::max()) {
      throw wrong_type(key, "token ids (integers)");
    }
    ids.push_back(int32_t(*id));
  }
  return ids;
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  if (!v) return {};
  if (v->is_string()) return {v->get<std::string>()};
  if (!v->is_array()) throw wrong_type("stop", "a string or an array of strings");
  if (v->size() > kMaxStopStrings) {
    throw bad_request("'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings", "stop");
  }
  std::vector<std::string> stops;
  for (const json& s : *v) {
    if (!s.is_string()) throw wrong_type("stop", "a string or an array of strings");
    stops.push_back(s.get<std::string>());
  }
  return stops;
}

// {"token_id": bias}: keys are token ids written as strings, as in OpenAI's API.
std::vector<std::pair<int32_t, float>> logit_bias(const json& body) {
  const json* v = field(body, "logit_bias");
  if (!v) return {};
  if (!v->is_object()) throw wrong_type("logit_bias", "an object of \"token_id\": bias");
  if (v->size() > kMaxTokenListSize) {
    throw bad_request("'logit_bias' may hold at most " + std::to_string(kMaxTokenListSize) + " entries", "logit_bias");
  }
  std::vector<std::pair<int32_t, float>> biases;
  for (const auto& [key, bias] : v->items()) {
    // Digits only: stoll alone would also take " +42" or "42abc"'s prefix.
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      throw bad_request("logit_bias keys must be token ids, got '" + key + "'", "logit_bias");
    }
    if (!bias.is_number()) throw wrong_type("logit_bias", "an object of \"token_id\": bias");
    biases.emplace_back(int32_t(id), bias.get<float>());
  }
  return biases;
}

void parse_stream_options(const json& body, GenerationRequest& r) {
  r.stream = opt_bool(body, "stream").value_or(false);
  const json* o = field(body, "stream_options");
  if (!o) return;
  if (!o->is_object()) throw wrong_type("stream_options", "an object");
  r.include_usage = opt_bool(*o, "include_usage").value_or(false);
}

SpeculativeOverride speculative_override(const json& body) {
  SpeculativeOverride o;
  if (auto name = opt_string(body, "speculative")) {
    o.method = parse_speculative_method(*name);
    if (!o.method) throw bad_request("'speculative' must be \"off\", \"ngram\" or \"suffix\"", "speculative");
  }
  o.num_speculative_tokens = opt_int(body, "num_speculative_tokens");
  if (auto error = validate(o)) throw bad_request(*error, "num_speculative_tokens");
  return o;
}

// Fields both endpoints share.
void parse_common(const json& body, GenerationRequest& r) {
  SamplingParams& p = r.params;
  if (auto v = opt_float(body, "temperature")) {
    // OpenAI's range; the engine (and gRPC) take any finite temperature >= 0.
    if (*v > 2.0f) throw bad_request("'temperature' must be in [0, 2], got " + json(*v).dump(), "temperature");
    p.temperature = *v;
  }
  if (auto v = opt_float(body, "top_p")) p.top_p = *v;
  if (auto v = opt_int(body, "top_k")) p.top_k = *v == -1 ? 0 : *v;  // vLLM spells "off" as -1
  if (auto v = opt_float(body, "min_p")) p.min_p = *v;
  if (auto v = opt_float(body, "presence_penalty")) p.presence_penalty = *v;
  if (auto v = opt_float(body, "frequency_penalty")) p.frequency_penalty = *v;
  if (auto v = opt_float(body, "repetition_penalty")) p.repetition_penalty = *v;
  if (auto v = opt_int64(body, "seed")) p.seed = uint64_t(*v);
  if (auto v = opt_bool(body, "ignore_eos")) p.ignore_eos = *v;
  p.stop = stop_strings(body);
  p.logit_bias = logit_bias(body);
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) throw wrong_type("stop_token_ids", "an array of token ids");
    if (ids->size() > kMaxTokenListSize) {
      throw bad_request("'stop_token_ids' may hold at most " + std::to_string(kMaxTokenListSize) + " ids", "stop_token_ids");
    }
    p.stop_token_ids = token_ids(*ids, "stop_token_ids");
  }
  opt_string(body, "user");  // a label for the caller's own bookkeeping; only its type is checked
  r.max_tokens = opt_int(body, "max_completion_tokens");
  if (!r.max_tokens) r.max_tokens = opt_int(body, "max_tokens");
  r.n = opt_int(body, "n").value_or(1);
  if (r.n < 1 || r.n > kMaxChoices) {
    throw bad_request("'n' must be in [1, " + std::to_string(kMaxChoices) + "], got " + std::to_string(r.n), "n");
  }
  r.priority = opt_int(body, "priority").value_or(0);
  r.speculative = speculative_override(body);
  parse_stream_options(body, r);
}

// Sizes are checked before any tokenizing: a prompt that cannot fit the context window is refused
// without spending a worker's time on it, and prompts x n before anything is allocated per prompt.
ApiError prompt_too_long(const Serving& serving) {
  return bad_request("the prompt is longer than the context window of " + std::to_string(serving.max_model_len()) +
                         " tokens can hold",
                     "prompt", "context_length_exceeded");
}

std::vector<int32_t> bounded_text_prompt(const std::string& text, const Serving& serving) {
  if (text.size() > serving.max_prompt_bytes()) throw prompt_too_long(serving);
  return serving.text_prompt(text);
}

std::vector<int32_t> bounded_token_prompt(const json& ids, const Serving& serving) {
  if (ids.size() > size_t(serving.max_model_len())) throw prompt_too_long(serving);
  return token_ids(ids, "prompt");
}

std::vector<std::vector<int32_t>> completion_prompts(const json& body, int32_t n, const Serving& serving) {
  const json* v = field(body, "prompt");
  if (!v) throw bad_request("'prompt' is required", "prompt");
  if (v->is_string()) return {bounded_text_prompt(v->get<std::string>(), serving)};
  const char* kinds = "a string, an array of strings, an array of token ids or an array of such arrays";
  if (!v->is_array() || v->empty()) throw wrong_type("prompt", kinds);
  if (v->front().is_number()) return {bounded_token_prompt(*v, serving)};
  if (int64_t(v->size()) * n > serving.max_choices()) {
    throw bad_request(std::to_string(v->size()) + " prompts x n=" + std::to_string(n) +
                          " is more sequences than this server queues (" + std::to_string(serving.max_choices()) + ")",
                      "prompt");
  }
  std::vector<std::vector<int32_t>> prompts;
  prompts.reserve(v->size());
  for (const json& e : *v) {
    if (e.is_string()) {
      prompts.push_back(bounded_text_prompt(e.get<std::string>(), serving));
    } else if (e.is_array()) {
      prompts.push_back(bounded_token_prompt(e, serving));
    } else {
      throw wrong_type("prompt", kinds);
    }
  }
  return prompts;
}

// Fields we list but do not implement yet are accepted only with a value that asks for nothing.
void refuse_unless(const json& body, const char* key, const std::function<bool(const json&)>& asks_nothing,
                   const std::string& why) {
  const json* v = field(body, key);
  if (v && !asks_nothing(*v)) throw bad_request("'" + std::string(key) + "' is not supported: " + why, key, "unsupported_parameter");
}

bool is_false(const json& v) { return v.is_boolean() && !v.get<bool>(); }
bool is_empty(const json& v) { return (v.is_array() || v.is_object() || v.is_string()) && v.empty(); }

// Labels and hints, checked for their shape, then not used (as `user` is): OpenAI's metadata (at
// most 16 string pairs, keys up to 64 characters, values up to 512), safety_identifier, and
// prompt_cache_key (the prefix cache finds shared prompts by their content, whatever key they
// come with).
void check_chat_labels(const json& body) {
  opt_string(body, "prompt_cache_key");
  opt_string(body, "safety_identifier");
  const json* m = field(body, "metadata");
  if (!m) return;
  const ApiError bad = bad_request(
      "'metadata' must be an object of at most 16 string values, keys up to 64 characters, values up to 512",
      "metadata");
  if (!m->is_object() || m->size() > 16) throw bad;
  for (const auto& [key, value] : m->items()) {
    if (key.size() > 64 || !value.is_string() || value.get_ref<const std::string&>().size() > 512) throw bad;
  }
}

void refuse_unsupported_chat(const json& body) {
  refuse_unless(body, "store", is_false, "this server stores nothing");
  refuse_unless(body, "verbosity", [](const json& v) { return v == "medium"; },
                "only the default, \"medium\": this server does not steer an answer's length");
  refuse_unless(body, "service_tier", [](const json& v) { return v == "auto" || v == "default"; }, "there is one tier");
  refuse_unless(body, "modalities", [](const json& v) { return v == json::array({"text"}); }, "only [\"text\"]");
  for (const char* key : {"audio", "prediction", "reasoning_effort", "web_search_options"}) {
    refuse_unless(body, key, [](const json&) { return false; }, "not available on this server");
  }
}

void refuse_unsupported_completion(const json& body, int32_t n) {
  refuse_unless(body, "echo", is_false, "the prompt is not echoed");
  refuse_unless(body, "suffix", is_empty, "insertion (a suffix after the completion) is not implemented");
  refuse_unless(body, "best_of", [n](const json& v) { return as_int(v) == n; },
                "only best_of equal to n (no server-side ranking of extra candidates)");
}

std::string message_content(const json& m) {
  const json* c = field(m, "content");
  if (!c) return "";
  if (c->is_string()) return c->get<std::string>();
  const ApiError bad_content = bad_request("message content must be a string or an array of text parts", "messages");
  if (!c->is_array()) throw bad_content;
  std::string text;
  for (const json& part : *c) {
    if (!part.is_object()) throw bad_content;
    if (opt_string(part, "type") != "text") throw bad_request("only text content parts are supported", "messages");
    text += opt_string(part, "text").value_or("");
  }
  return text;
}

// An assistant message's calls, as the API returned them: [{id, type, function: {name, arguments}}].
json tool_calls_of(const json& m, size_t& bytes) {
  const json* calls = field(m, "tool_calls");
  const ApiError bad = bad_request(
      "an assistant message's 'tool_calls' must be an array of {id, type: 'function', function: {name, arguments}}",
      "messages");
  if (!calls->is_array()) throw bad;
  json out = json::array();
  for (const json& c : *calls) {
    if (!c.is_object() || opt_string(c, "type").value_or("function") != "function") throw bad;
    const json* fn = field(c, "function");
    if (!fn || !fn->is_object()) throw bad;
    const auto id = opt_string(c, "id");
    const auto name = opt_string(*fn, "name");
    const auto arguments = opt_string(*fn, "arguments");
    if (!id || !name || !arguments) throw bad;
    bytes += id->size() + name->size() + arguments->size();
    out.push_back({{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", *arguments}}}});
  }
  return out;
}

// Every message adds at least one token, so more messages than the context window holds tokens
// can never fit: refused before templating. Out come {role, content} objects with string
// content, plus tool_calls (assistant) and tool_call_id (tool).
json chat_messages(const json& messages, const Serving& serving) {
  if (!messages.is_array() || messages.empty()) throw wrong_type("messages", "a non-empty array");
  if (messages.size() > size_t(serving.max_model_len())) throw prompt_too_long(serving);
  json out = json::array();
  size_t total_bytes = 0;
  for (const json& m : messages) {
    if (!m.is_object()) throw wrong_type("messages", "an array of {role, content} objects");
    auto role = opt_string(m, "role");
    if (!role) throw bad_request("every message needs a 'role'", "messages");
    // OpenAI's newer name for system instructions; templates know only "system".
    if (*role == "developer") role = "system";
    json msg = {{"role", *role}, {"content", message_content(m)}};
    total_bytes += msg["content"].get_ref<const std::string&>().size();
    if (*role == "assistant" && field(m, "tool_calls")) msg["tool_calls"] = tool_calls_of(m, total_bytes);
    // A reasoning model's earlier reasoning, as it was returned: its template decides whether to show it.
    if (const json* r = field(m, "reasoning_content"); r && *role == "assistant") {
      if (!r->is_string()) throw bad_request("an assistant message's 'reasoning_content' must be a string", "messages");
      msg["reasoning_content"] = *r;
      total_bytes += r->get_ref<const std::string&>().size();
    }
    if (*role == "tool") {
      const auto id = opt_string(m, "tool_call_id");
      if (!id) throw bad_request("a 'tool' message needs the 'tool_call_id' it answers", "messages");
      msg["tool_call_id"] = *id;
    }
    out.push_back(std::move(msg));
    if (total_bytes > serving.max_prompt_bytes()) throw prompt_too_long(serving);
  }
  return out;
}

}  // namespace

ApiError api_error(const RequestError& e) {
  switch (e.kind) {
    case ErrorKind::Invalid:
      return bad_request(e.message);
    case ErrorKind::TooLong:
      return bad_request(e.message, "", "context_length_exceeded");
    case ErrorKind::Overloaded: {
      ApiError a(429, e.message, "rate_limit_error", "", "rate_limit_exceeded");
      a.retry_after_s = 1;
      return a;
    }
    case ErrorKind::Unavailable: {
      ApiError a(503, e.message, "server_error", "", "service_unavailable");
      a.retry_after_s = 5;
      return a;
    }
    case ErrorKind::Deadline:
      return ApiError(504, e.message, "server_error", "", "deadline_exceeded");
    case ErrorKind::Internal:
      break;
  }
  return ApiError(500, e.message, "server_error");
}

std::string_view rejection_reason(const ApiError& e) {
  switch (e.status) {
    case 401: return "unauthenticated";
    case 413: return "body_too_large";
    case 429: return to_string(ErrorKind::Overloaded);
    case 503: return to_string(ErrorKind::Unavailable);
    case 504: return to_string(ErrorKind::Deadline);
  }
  if (e.status >= 500) return to_string(ErrorKind::Internal);
  return e.code == "context_length_exceeded" ? to_string(ErrorKind::TooLong) : to_string(ErrorKind::Invalid);
}

void check_model(const json& body, const std::string& served_name) {
  auto model = opt_string(body, "model");
  if (model && *model != served_name) {
    throw ApiError(404, "The model '" + *model + "' does not exist; this server serves '" + served_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
}

std::vector<int32_t> chat_prompt_ids(const json& messages, const Serving& serving, const json& tools,
                                     const json& template_kwargs) {
  const json msgs = chat_messages(messages, serving);
  try {
    return serving.chat_prompt(msgs, tools, template_kwargs);
  } catch (const UnsupportedTemplate& e) {
    throw bad_request(std::string("chat is not available for this model: ") + e.what(), "messages");
  } catch (const std::invalid_argument& e) {
    throw bad_request(e.what(), "messages");
  }
}

// response_format / grammar / regex, or a forced tool call: compiled (or found in the cache) for
// every choice to share.
void constrain(const json& body, const Serving& serving, GenerationRequest& r, const std::function<bool()>& cancelled) {
  std::optional<RequestedGrammar> g = requested_grammar(body);
  if (r.tools) {
    if (g) {
      throw bad_request("'" + g->field + "' and 'tools' cannot be combined: the format would rule out tool calls "
                        "(give one, or tool_choice 'none')", g->field);
    }
    if (r.tools->forced()) {
      try {
        g = RequestedGrammar{tool_call_gbnf(*r.tools), "tools"};
      } catch (const grammar::GrammarError& e) {
        throw bad_request(std::string("a function's parameters cannot be enforced: ") + e.what(), "tools");
      }
    }
  }
  if (!g) return;
  try {
    r.params.grammar = serving.compile_grammar(g->gbnf, cancelled);
  } catch (const grammar::CompileCancelled& e) {
    ApiError a(503, std::string(e.what()) + ": the client left or the server is stopping", "server_error", "",
               "service_unavailable");
    a.retry_after_s = 1;
    throw a;
  } catch (const grammar::GrammarError& e) {
    throw bad_request(e.what(), g->field);
  }
}

// chat_template_kwargs: more variables for the template (enable_thinking, ...), but not those the
// server sets itself.
json template_kwargs(const json& body) {
  const json* v = field(body, "chat_template_kwargs");
  if (!v) return json::object();
  if (!v->is_object()) throw wrong_type("chat_template_kwargs", "an object");
  for (const char* reserved : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token"}) {
    if (v->contains(reserved)) {
      throw bad_request("'chat_template_kwargs' may not set '" + std::string(reserved) + "': the server sets it",
                        "chat_template_kwargs");
    }
  }
  return *v;
}

// A reasoning model's output is split into reasoning and answer; its reasoning may have a budget
// (the request's, else the server's). A constrained answer has no reasoning: the grammar decides
// every token from the first.
void plan_reasoning(const json& body, const Serving& serving, GenerationRequest& r) {
  const std::optional<int32_t> asked = opt_int(body, "reasoning_budget");
  const auto& tags = serving.reasoning_tags();
  if (asked && !tags) {
    throw bad_request("'reasoning_budget' needs a reasoning model (see --reasoning-parser)", "reasoning_budget",
                      "unsupported_parameter");
  }
  if (asked && *asked < -1) throw bad_request("'reasoning_budget' must be -1 (no limit) or >= 0", "reasoning_budget");
  if (asked && *asked >= 0 && r.params.grammar) {
    throw bad_request("'reasoning_budget' cannot be combined with a constrained answer (response_format, grammar, "
                      "regex or a forced tool call): such an answer has no reasoning",
                      "reasoning_budget");
  }
  if (!tags) return;
  const bool inside = !r.params.grammar && serving.opens_reasoning(r.prompts[0]);
  r.reasoning = ReasoningMode{*tags, inside};
  const int32_t budget = asked.value_or(serving.reasoning_budget_default());
  if (budget >= 0 && !r.params.grammar) r.params.reasoning_budget = serving.reasoning_budget(budget, inside);
}

// tool_choice auto without parallel calls: the answer ends after its first call.
void stop_after_one_call(GenerationRequest& r) {
  if (!r.tools || r.tools->choice != ToolChoice::Auto || r.tools->parallel) return;
  if (r.params.stop.size() >= kMaxStopStrings) {
    throw bad_request("with 'parallel_tool_calls' false, 'stop' may hold at most " +
                          std::to_string(kMaxStopStrings - 1) + " strings (the server adds one after the first call)",
                      "stop");
  }
  r.params.stop.push_back("</tool_call>");
}

GenerationRequest parse_completion_request(const json& body, const Serving& serving,
                                           const std::function<bool()>& cancelled) {
  refuse_unknown(body, kCompletionFields);
  check_model(body, serving.model_name());
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  parse_common(body, r);
  refuse_unsupported_completion(body, r.n);
  if (auto v = opt_int(body, "logprobs")) {
    if (*v < 0 || *v > kMaxLogprobs) throw bad_request("'logprobs' must be in [0, 20]", "logprobs");
    r.logprobs = true;
    r.params.logprobs = *v;
  }
  constrain(body, serving, r, cancelled);
  r.prompts = completion_prompts(body, r.n, serving);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const Serving& serving,
                                     const std::function<bool()>& cancelled) {
  refuse_unknown(body, kChatFields);
  check_model(body, serving.model_name());
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  parse_common(body, r);
  refuse_unsupported_chat(body);
  check_chat_labels(body);
  r.logprobs = opt_bool(body, "logprobs").value_or(false);
  const auto top = opt_int(body, "top_logprobs");
  if (top && !r.logprobs) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (top && (*top < 0 || *top > kMaxLogprobs)) throw bad_request("'top_logprobs' must be in [0, 20]", "top_logprobs");
  if (r.logprobs) r.params.logprobs = top.value_or(0);
  r.tools = requested_tools(body);
  // tool_choice none: the tools are left out of the prompt and the output is not read for calls.
  if (r.tools && r.tools->choice == ToolChoice::None) r.tools.reset();
  constrain(body, serving, r, cancelled);
  stop_after_one_call(r);
  const json* messages = field(body, "messages");
  if (!messages) throw bad_request("'messages' is required", "messages");
  r.prompts = {chat_prompt_ids(*messages, serving, r.tools ? r.tools->tools : json(nullptr), template_kwargs(body))};
  plan_reasoning(body, serving, r);
  return r;
}

std::vector<int32_t> parse_tokenize_request(const json& body, const Serving& serving) {
  check_model(body, serving.model_name());
  if (const json* messages = field(body, "messages")) return chat_prompt_ids(*messages, serving);
  const auto prompt = opt_string(body, "prompt");
  if (!prompt) throw bad_request("'prompt' (a string) or 'messages' is required", "prompt");
  if (prompt->size() > serving.max_prompt_bytes()) throw prompt_too_long(serving);
  if (opt_bool(body, "add_special_tokens").value_or(true)) return serving.text_prompt(*prompt);
  return serving.tokenizer().encode(*prompt, /*add_special=*/false, /*parse_special=*/true);
}

std::vector<int32_t> parse_detokenize_request(const json& body, const Serving& serving) {
  check_model(body, serving.model_name());
  const json* tokens = field(body, "tokens");
  if (!tokens || !tokens->is_array()) throw wrong_type("tokens", "an array of token ids");
  std::vector<int32_t> ids = token_ids(*tokens, "tokens");
  const int32_t vocab_size = serving.tokenizer().vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      throw bad_request("token id " + std::to_string(id) + " is not in [0, " + std::to_string(vocab_size) + ")", "tokens");
    }
  }
  return ids;
}

SamplingParams params_for(const GenerationRequest& r, int32_t choice, int32_t max_model_len,
                          int32_t max_tokens_default) {
  SamplingParams p = r.params;
  const int32_t prompt_len = int32_t(r.prompts[size_t(choice / r.n)].size());
  if (r.pooling) {
    p.max_tokens = 1;  // nothing is generated; the engine's rules still ask for one
  } else if (r.max_tokens) {
    p.max_tokens = *r.max_tokens;
  } else if (r.endpoint == Endpoint::Completions) {
    p.max_tokens = max_tokens_default > 0 ? max_tokens_default : 16;  // OpenAI's default for completions
  } else {
    // Chat: the rest of what one request may hold (at least 1, so an overlong prompt is refused as
    // too long rather than as a bad max_tokens), no more than the server's default when it has one.
    p.max_tokens = std::max(1, max_model_len - prompt_len);
    if (max_tokens_default > 0) p.max_tokens = std::min(p.max_tokens, max_tokens_default);
  }
  if (p.seed) *p.seed += uint64_t(choice % r.n);
  return p;
}

std::vector<GenerateRequest> engine_requests(const GenerationRequest& r, int32_t max_model_len,
                                             int32_t max_tokens_default) {
  std::vector<GenerateRequest> choices;
  for (int32_t c = 0; c < r.num_choices(); ++c) {
    GenerateRequest& g = choices.emplace_back();
    g.prompt_ids = r.prompts[size_t(c / r.n)];
    g.params = params_for(r, c, max_model_len, max_tokens_default);
    g.priority = r.priority;
    g.speculative = r.speculative;
    g.pooling = r.pooling;
  }
  return choices;
}

}  // namespace flashserve
