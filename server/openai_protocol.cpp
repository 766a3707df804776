#include "server/openai_protocol.h"

#include <cmath>
#include <limits>

namespace flashserve {
namespace {

constexpr int32_t kMaxChoices = 16;
constexpr int32_t kMaxLogprobs = 20;

// Absent and null both mean "not given", as the OpenAI API treats them.
const json* field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
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
  std::vector<std::pair<int32_t, float>> biases;
  for (const auto& [key, bias] : v->items()) {
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || id < 0 || id > std::numeric_limits<int32_t>::max()) {
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

// Fields both endpoints share.
void parse_common(const json& body, GenerationRequest& r) {
  SamplingParams& p = r.params;
  if (auto v = opt_float(body, "temperature")) p.temperature = *v;
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
    p.stop_token_ids = token_ids(*ids, "stop_token_ids");
  }
  r.max_tokens = opt_int(body, "max_completion_tokens");
  if (!r.max_tokens) r.max_tokens = opt_int(body, "max_tokens");
  r.n = opt_int(body, "n").value_or(1);
  if (r.n < 1 || r.n > kMaxChoices) {
    throw bad_request("'n' must be in [1, " + std::to_string(kMaxChoices) + "], got " + std::to_string(r.n), "n");
  }
  r.priority = opt_int(body, "priority").value_or(0);
  parse_stream_options(body, r);
}

std::vector<std::vector<int32_t>> completion_prompts(const json& body, const Serving& serving) {
  const json* v = field(body, "prompt");
  if (!v) throw bad_request("'prompt' is required", "prompt");
  if (v->is_string()) return {serving.text_prompt(v->get<std::string>())};
  const char* kinds = "a string, an array of strings, an array of token ids or an array of such arrays";
  if (!v->is_array() || v->empty()) throw wrong_type("prompt", kinds);
  if (v->front().is_number()) return {token_ids(*v, "prompt")};
  std::vector<std::vector<int32_t>> prompts;
  for (const json& e : *v) {
    if (e.is_string()) {
      prompts.push_back(serving.text_prompt(e.get<std::string>()));
    } else if (e.is_array()) {
      prompts.push_back(token_ids(e, "prompt"));
    } else {
      throw wrong_type("prompt", kinds);
    }
  }
  return prompts;
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

std::vector<ChatMessage> chat_messages(const json& messages) {
  if (!messages.is_array() || messages.empty()) throw wrong_type("messages", "a non-empty array");
  std::vector<ChatMessage> out;
  for (const json& m : messages) {
    if (!m.is_object()) throw wrong_type("messages", "an array of {role, content} objects");
    auto role = opt_string(m, "role");
    if (!role) throw bad_request("every message needs a 'role'", "messages");
    out.push_back({*role, message_content(m)});
  }
  return out;
}

}  // namespace

ApiError bad_request(const std::string& message, const std::string& param, const std::string& code) {
  return ApiError(400, message, "invalid_request_error", param, code);
}

json error_body(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? json(nullptr) : json(s); };
  return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

ApiError submit_error(const SubmitResult& r) {
  if (r.draining) return ApiError(503, "the server is shutting down", "server_error", "", "service_unavailable");
  switch (r.rejection->reason) {
    case RejectReason::TooLong:
      return bad_request(r.rejection->message, "", "context_length_exceeded");
    case RejectReason::Overloaded:
      return ApiError(429, r.rejection->message, "rate_limit_error", "", "rate_limit_exceeded");
    case RejectReason::Invalid:
      break;
  }
  return bad_request(r.rejection->message);
}

json parse_body(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw bad_request("the request body is not valid JSON");
  if (!j.is_object()) throw bad_request("the request body must be a JSON object");
  return j;
}

void check_model(const json& body, const std::string& served_name) {
  auto model = opt_string(body, "model");
  if (model && *model != served_name) {
    throw ApiError(404, "The model '" + *model + "' does not exist; this server serves '" + served_name + "'",
                   "invalid_request_error", "model", "model_not_found");
  }
}

std::vector<int32_t> chat_prompt_ids(const json& messages, const Serving& serving) {
  const std::vector<ChatMessage> msgs = chat_messages(messages);
  try {
    return serving.chat_prompt(msgs);
  } catch (const UnsupportedTemplate& e) {
    throw bad_request(std::string("chat is not available for this model: ") + e.what(), "messages");
  } catch (const std::invalid_argument& e) {
    throw bad_request(e.what(), "messages");
  }
}

GenerationRequest parse_completion_request(const json& body, const Serving& serving) {
  check_model(body, serving.model_name());
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  parse_common(body, r);
  if (opt_bool(body, "echo").value_or(false)) throw bad_request("'echo' is not supported", "echo");
  if (auto v = opt_int(body, "logprobs")) {
    if (*v < 0 || *v > kMaxLogprobs) throw bad_request("'logprobs' must be in [0, 20]", "logprobs");
    r.logprobs = true;
    r.params.logprobs = *v;
  }
  r.prompts = completion_prompts(body, serving);
  return r;
}

GenerationRequest parse_chat_request(const json& body, const Serving& serving) {
  check_model(body, serving.model_name());
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  parse_common(body, r);
  r.logprobs = opt_bool(body, "logprobs").value_or(false);
  const auto top = opt_int(body, "top_logprobs");
  if (top && !r.logprobs) throw bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs");
  if (top && (*top < 0 || *top > kMaxLogprobs)) throw bad_request("'top_logprobs' must be in [0, 20]", "top_logprobs");
  if (r.logprobs) r.params.logprobs = top.value_or(0);
  const json* messages = field(body, "messages");
  if (!messages) throw bad_request("'messages' is required", "messages");
  r.prompts = {chat_prompt_ids(*messages, serving)};
  return r;
}

std::vector<int32_t> parse_tokenize_request(const json& body, const Serving& serving) {
  check_model(body, serving.model_name());
  if (const json* messages = field(body, "messages")) return chat_prompt_ids(*messages, serving);
  const auto prompt = opt_string(body, "prompt");
  if (!prompt) throw bad_request("'prompt' (a string) or 'messages' is required", "prompt");
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

SamplingParams params_for(const GenerationRequest& r, int32_t choice, int32_t max_model_len) {
  SamplingParams p = r.params;
  const int32_t prompt_len = int32_t(r.prompts[size_t(choice / r.n)].size());
  // Without max_tokens, the rest of what one request may hold (at least 1, so an overlong prompt
  // is refused as too long rather than as a bad max_tokens).
  p.max_tokens = r.max_tokens ? *r.max_tokens : std::max(1, max_model_len - prompt_len);
  if (p.seed) *p.seed += uint64_t(choice % r.n);
  return p;
}

}  // namespace flashserve
