#include "server/openai_response.h"

#include <algorithm>
#include <ctime>
#include <utility>

namespace flashserve {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// Strict enough for display: lead bytes, continuation counts, no surrogates or values past U+10FFFF.
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if ((c >> 6) != 0x2) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

json finish_reason_json(const std::optional<FinishReason>& r) {
  return r ? json(std::string(to_string(*r))) : json(nullptr);
}

}  // namespace

ResponseBuilder::ResponseBuilder(const GenerationRequest& request, const Tokenizer& tok, std::string model,
                                 std::string fingerprint)
    : request_(request),
      tok_(tok),
      model_(std::move(model)),
      fingerprint_(std::move(fingerprint)),
      id_(random_id(request.endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-")),
      created_(int64_t(std::time(nullptr))),
      choices_(size_t(request.num_choices())) {
  for (Choice& c : choices_) {
    if (request.stream && request.tools) c.calls.emplace(request.tools->names);
    if (request.stream && request.reasoning) c.reasoning.emplace(*request.reasoning);
  }
}

json ResponseBuilder::envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}, {"system_fingerprint", fingerprint_}};
}

// Prompt tokens count once per prompt (not per choice), completion tokens once per choice; a
// prompt's cached tokens are those its first choice found in the prefix cache.
json ResponseBuilder::usage() const {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  for (const auto& p : request_.prompts) prompt_tokens += int64_t(p.size());
  for (size_t i = 0; i < choices_.size(); ++i) {
    completion_tokens += choices_[i].num_output_tokens;
    if (i % size_t(request_.n) == 0) cached_tokens += choices_[i].num_cached_tokens;
  }
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

bool ResponseBuilder::produced_tokens() const {
  return std::any_of(choices_.begin(), choices_.end(), [](const Choice& c) { return c.num_output_tokens > 0; });
}

json ResponseBuilder::completion_chunk(int32_t index, const std::string& text, json logprobs,
                                       json finish_reason) const {
  json j = envelope("text_completion");
  j["choices"] = json::array(
      {{{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish_reason)}}});
  if (request_.include_usage) j["usage"] = nullptr;  // as OpenAI: present, null until the last chunk
  return j;
}

json ResponseBuilder::chat_chunk(int32_t index, json delta, json logprobs, json finish_reason) const {
  json j = envelope("chat.completion.chunk");
  j["choices"] = json::array({{{"index", index},
                               {"delta", std::move(delta)},
                               {"logprobs", std::move(logprobs)},
                               {"finish_reason", std::move(finish_reason)}}});
  if (request_.include_usage) j["usage"] = nullptr;
  return j;
}

// Completions: {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}, the sampled
// token always among its top_logprobs. Chat: {content: [{token, logprob, bytes, top_logprobs}]}.
// A token that is only part of a UTF-8 character is spelled "bytes:\xNN..." as OpenAI does.
json ResponseBuilder::logprobs_json(const std::vector<SampledToken>& tokens, size_t& text_offset) const {
  auto spelling = [&](int32_t id) {
    const std::string bytes = tok_.token_bytes(id);
    if (valid_utf8(bytes)) return bytes;
    std::string s = "bytes:";
    for (unsigned char b : bytes) s += {'\\', 'x', kHex[b >> 4], kHex[b & 15]};
    return s;
  };
  auto raw_bytes = [&](int32_t id) {
    const std::string bytes = tok_.token_bytes(id);
    json list = json::array();
    for (unsigned char b : bytes) list.push_back(int(b));
    return list;
  };
  if (request_.endpoint == Endpoint::Chat) {
    json content = json::array();
    for (const SampledToken& t : tokens) {
      json top = json::array();
      for (const auto& [id, lp] : t.top_logprobs) top.push_back({{"token", spelling(id)}, {"logprob", lp}, {"bytes", raw_bytes(id)}});
      content.push_back({{"token", spelling(t.token)}, {"logprob", t.logprob}, {"bytes", raw_bytes(t.token)},
                         {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const SampledToken& t : tokens) {
    json top = json::object();
    for (const auto& [id, lp] : t.top_logprobs) top[spelling(id)] = lp;
    top[spelling(t.token)] = t.logprob;
    out["tokens"].push_back(spelling(t.token));
    out["token_logprobs"].push_back(t.logprob);
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(text_offset);
    text_offset += tok_.token_bytes(t.token, /*render_special=*/false).size();
  }
  return out;
}

std::string ResponseBuilder::role_chunks() const {
  if (request_.endpoint != Endpoint::Chat) return "";
  std::string out;
  for (int32_t i = 0; i < request_.num_choices(); ++i) {
    const json content = request_.tools ? json(nullptr) : json("");  // see Choice::held_content
    out += sse_event(chat_chunk(i, {{"role", "assistant"}, {"content", content}}, nullptr, nullptr));
  }
  return out;
}

std::string ResponseBuilder::add(const std::vector<ChoiceEvent>& events) {
  std::string out;
  if (request_.stream && !started_) out = role_chunks();
  started_ = true;
  for (const ChoiceEvent& e : events) {
    Choice& c = choices_[size_t(e.choice)];
    const RequestOutput& o = e.output;
    c.num_output_tokens = o.num_output_tokens;
    c.num_cached_tokens = o.num_cached_tokens;
    c.finish = o.finish;
    if (o.finish == FinishReason::Abort) {
      failure_ = server_abort_error(o);
      if (request_.stream) out += abort_chunk(e.choice) + error_event();
      return out;
    }
    if (request_.stream) {
      out += stream_chunks(e);
    } else {
      c.text += o.text;
      if (request_.logprobs) c.tokens.insert(c.tokens.end(), o.tokens.begin(), o.tokens.end());
    }
  }
  return out;
}

// Completions put the finish reason on the last text chunk; chat sends it in a chunk of its own
// with an empty delta.
std::string ResponseBuilder::stream_chunks(const ChoiceEvent& e) {
  const RequestOutput& o = e.output;
  const bool with_logprobs = request_.logprobs && !o.tokens.empty();
  json logprobs = with_logprobs ? logprobs_json(o.tokens, choices_[size_t(e.choice)].text_offset) : json(nullptr);
  if (request_.endpoint == Endpoint::Completions) {
    if (o.text.empty() && !with_logprobs && !o.finish) return "";
    return sse_event(completion_chunk(e.choice, o.text, std::move(logprobs), finish_reason_json(o.finish)));
  }
  Choice& c = choices_[size_t(e.choice)];
  std::string out;
  SplitOutput split{"", o.text};
  if (c.reasoning) split = c.reasoning->feed(o.text, o.finish.has_value());
  if (!split.reasoning.empty()) {
    // The token's logprobs go with the first chunk it makes.
    out += sse_event(chat_chunk(e.choice, {{"reasoning_content", split.reasoning}}, std::exchange(logprobs, nullptr),
                                nullptr));
  }
  ParsedOutput parsed{split.content, {}};
  if (c.calls) {
    parsed = c.calls->feed(split.content);
    if (o.finish) {
      ParsedOutput rest = c.calls->finish();
      parsed.content += rest.content;
      parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
    }
  }
  json content = std::move(parsed.content);
  bool flushed = false;  // the held content goes out now, even empty: it is no longer null
  if (c.calls && !c.content_sent) {
    c.held_content += content.get<std::string>();
    const bool blank = c.held_content.find_first_not_of(" \t\r\n") == std::string::npos;
    // The whole answer's content is its raw text when no call was made, blank or not.
    const bool ends_without_calls = o.finish && c.calls->num_calls() == 0;
    content = nullptr;
    if (!blank || ends_without_calls) {
      content = std::exchange(c.held_content, "");
      c.content_sent = flushed = true;
    }
  }
  const bool has_text = content.is_string() && !content.get_ref<const std::string&>().empty();
  if (has_text || flushed || !logprobs.is_null()) {
    out += sse_event(chat_chunk(e.choice, {{"content", std::move(content)}}, std::move(logprobs), nullptr));
  }
  for (const ToolCallDelta& d : parsed.calls) {
    out += sse_event(chat_chunk(e.choice, {{"tool_calls", json::array({tool_call_delta(d)})}}, nullptr, nullptr));
  }
  if (o.finish) {
    const int32_t num_calls = c.calls ? c.calls->num_calls() : 0;
    out += sse_event(chat_chunk(e.choice, json::object(), nullptr, choice_finish_reason(c, num_calls)));
  }
  return out;
}

// OpenAI's shape: the first delta of a call carries its id, type and name, the rest only more of
// its arguments' text.
json ResponseBuilder::tool_call_delta(const ToolCallDelta& d) const {
  if (!d.first) return {{"index", d.index}, {"function", {{"arguments", d.arguments}}}};
  return {{"index", d.index},
          {"id", random_id("call_")},
          {"type", "function"},
          {"function", {{"name", d.name}, {"arguments", d.arguments}}}};
}

// An answer that ended on its own after making calls finished to call them.
json ResponseBuilder::choice_finish_reason(const Choice& c, int32_t num_calls) const {
  if (num_calls > 0 && c.finish == FinishReason::Stop) return "tool_calls";
  return finish_reason_json(c.finish);
}

// The whole answer: its reasoning (reasoning models), content, and the calls read from it when
// tools were offered (content is then null if nothing but whitespace is left of it, as OpenAI sends it).
json ResponseBuilder::chat_message(const Choice& c) const {
  SplitOutput split{"", c.text};
  if (request_.reasoning) split = ReasoningSplitter(*request_.reasoning).feed(c.text, /*last=*/true);
  json message = {{"role", "assistant"}, {"content", split.content}};
  if (request_.reasoning) message["reasoning_content"] = split.reasoning.empty() ? json(nullptr) : json(split.reasoning);
  if (!request_.tools) return message;
  ToolCallParser parser(request_.tools->names);
  ParsedOutput parsed = parser.feed(split.content);
  ParsedOutput rest = parser.finish();
  parsed.content += rest.content;
  parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
  if (parsed.calls.empty()) return message;
  json calls = json::array();
  for (const ToolCallDelta& d : parsed.calls) {
    if (d.first) {
      calls.push_back({{"id", random_id("call_")}, {"type", "function"}, {"function", {{"name", d.name}, {"arguments", ""}}}});
    }
    calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + d.arguments;
  }
  const bool blank = parsed.content.find_first_not_of(" \t\r\n") == std::string::npos;
  message["content"] = blank ? json(nullptr) : json(parsed.content);
  message["tool_calls"] = std::move(calls);
  return message;
}

std::string ResponseBuilder::fail_unfinished(const RequestError& error) {
  failure_ = error;
  if (!request_.stream) return "";
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    if (choices_[i].finish) continue;
    choices_[i].finish = FinishReason::Abort;
    out += abort_chunk(int32_t(i));
  }
  return out + error_event();
}

std::string ResponseBuilder::abort_chunk(int32_t choice) const {
  const json reason = std::string(to_string(FinishReason::Abort));
  if (request_.endpoint == Endpoint::Completions) return sse_event(completion_chunk(choice, "", nullptr, reason));
  return sse_event(chat_chunk(choice, json::object(), nullptr, reason));
}

std::string ResponseBuilder::error_event() const { return sse_event(error_body(api_error(*failure_))); }

std::string ResponseBuilder::finish() {
  if (!request_.stream) return final_body();
  std::string out;
  if (request_.include_usage && !failure_) {
    json j = envelope(request_.endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion");
    j["choices"] = json::array();
    j["usage"] = usage();
    out += sse_event(j);
  }
  return out + "data: [DONE]\n\n";
}

std::string ResponseBuilder::final_body() const {
  if (failure_) return dump(error_body(api_error(*failure_)));
  const bool chat = request_.endpoint == Endpoint::Chat;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    size_t offset = 0;
    json logprobs = request_.logprobs ? logprobs_json(c.tokens, offset) : json(nullptr);
    json choice = {{"index", i}, {"logprobs", std::move(logprobs)}, {"finish_reason", finish_reason_json(c.finish)}};
    if (chat) {
      choice["message"] = chat_message(c);
      if (choice["message"].contains("tool_calls")) {
        choice["finish_reason"] = choice_finish_reason(c, int32_t(choice["message"]["tool_calls"].size()));
      }
    } else {
      choice["text"] = c.text;
    }
    choices.push_back(std::move(choice));
  }
  json body = envelope(chat ? "chat.completion" : "text_completion");
  body["choices"] = std::move(choices);
  body["usage"] = usage();
  return dump(body);
}

}  // namespace flashserve
