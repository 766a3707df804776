#include "server/messages_writer.h"

#include <algorithm>

#include "model/bounded_json.h"

namespace flashserve {
namespace {

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    case 504: return "timeout_error";
  }
  return status >= 500 ? "api_error" : "invalid_request_error";
}

// A tool_use block's input is an object. Arguments that are not one whole (cut off by max_tokens:
// stop_reason says so) leave it empty; a stream has already sent their text.
json parsed_input(const std::string& text) {
  try {
    json input = parse_bounded_json<json>(text);
    if (input.is_object()) return input;
  } catch (const JsonOverLimit&) {
  }
  return json::object();
}

}  // namespace

json anthropic_error_body(const ApiError& e) {
  return {{"type", "error"}, {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.what()}}}};
}

MessagesWriter::MessagesWriter(const GenerationRequest& request, std::vector<std::string> stop_sequences,
                               std::string model)
    : request_(request),
      stop_sequences_(std::move(stop_sequences)),
      model_(std::move(model)),
      id_(random_id("msg_")),
      splitter_(request.tools, request.reasoning) {}

// Each event's data repeats its name as `type`, as the SDKs' stream readers expect; nothing when
// not streaming (the blocks still grow).
std::string MessagesWriter::event(const char* type, json payload) {
  if (!request_.stream) return "";
  json e = {{"type", type}};
  e.update(payload);
  return sse_event(type, e);
}

// Anthropic counts prompt tokens read from its cache apart from input_tokens; ours are prefix-cache
// hits. Nothing is ever written to a cache on request.
json MessagesWriter::usage() const {
  const int64_t input = int64_t(request_.prompts[0].size()) - num_cached_tokens_;
  return {{"input_tokens", input},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", num_cached_tokens_},
          {"output_tokens", num_output_tokens_}};
}

json MessagesWriter::stop_reason() const {
  if (!finish_) return nullptr;
  if (*finish_ == FinishReason::Length) return "max_tokens";
  if (stop_sequence_) return "stop_sequence";
  return num_tool_uses_ > 0 ? "tool_use" : "end_turn";
}

json MessagesWriter::stop_sequence() const { return stop_sequence_ ? json(*stop_sequence_) : json(nullptr); }

json MessagesWriter::message() const {
  return {{"id", id_},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model_},
          {"content", content_},
          {"stop_reason", stop_reason()},
          {"stop_sequence", stop_sequence()},
          {"usage", usage()}};
}

std::string MessagesWriter::start() {
  started_ = true;
  return event("message_start", {{"message", message()}}) + event("ping", json::object());
}

std::string MessagesWriter::open_block(json block) {
  std::string out = close_block();
  content_.push_back(std::move(block));
  block_open_ = true;
  return out + event("content_block_start", {{"index", content_.size() - 1}, {"content_block", content_.back()}});
}

std::string MessagesWriter::close_block() {
  if (!block_open_) return "";
  block_open_ = false;
  json& block = content_.back();
  if (block["type"] == "tool_use") block["input"] = parsed_input(input_text_);
  return event("content_block_stop", {{"index", content_.size() - 1}});
}

// A reasoning model's reasoning. Unsigned: this server has no key to sign it with.
std::string MessagesWriter::add_thinking(const std::string& text) {
  std::string out;
  if (!block_open_ || content_.back()["type"] != "thinking") {
    out += open_block({{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
  }
  content_.back()["thinking"].get_ref<std::string&>() += text;
  return out + event("content_block_delta",
                     {{"index", content_.size() - 1}, {"delta", {{"type", "thinking_delta"}, {"thinking", text}}}});
}

std::string MessagesWriter::add_text(const std::string& text) {
  std::string out;
  if (!block_open_ || content_.back()["type"] != "text") out += open_block({{"type", "text"}, {"text", ""}});
  content_.back()["text"].get_ref<std::string&>() += text;
  return out + event("content_block_delta",
                     {{"index", content_.size() - 1}, {"delta", {{"type", "text_delta"}, {"text", text}}}});
}

std::string MessagesWriter::add_tool_use(const ToolCallDelta& d) {
  std::string out;
  if (d.first) {
    out += open_block({{"type", "tool_use"}, {"id", random_id("toolu_")}, {"name", d.name}, {"input", json::object()}});
    input_text_.clear();
    ++num_tool_uses_;
  }
  if (d.arguments.empty()) return out;
  input_text_ += d.arguments;
  return out + event("content_block_delta", {{"index", content_.size() - 1},
                                             {"delta", {{"type", "input_json_delta"}, {"partial_json", d.arguments}}}});
}

std::string MessagesWriter::add(const std::vector<ChoiceEvent>& events) {
  std::string out;
  if (!started_) {
    if (!events.empty()) num_cached_tokens_ = events.front().output.num_cached_tokens;
    out += start();
  }
  for (const ChoiceEvent& e : events) {
    const RequestOutput& o = e.output;
    num_output_tokens_ = o.num_output_tokens;
    num_cached_tokens_ = o.num_cached_tokens;
    if (o.finish == FinishReason::Abort) {
      failure_ = server_abort_error(o);
      return out + failed();
    }
    finish_ = o.finish;
    if (o.stop_string &&
        std::find(stop_sequences_.begin(), stop_sequences_.end(), *o.stop_string) != stop_sequences_.end()) {
      stop_sequence_ = o.stop_string;
    }
    const OutputParts parsed = splitter_.feed(o.text, o.finish.has_value());
    if (!parsed.reasoning.empty()) out += add_thinking(parsed.reasoning);
    if (!parsed.content.empty()) out += add_text(parsed.content);
    for (const ToolCallDelta& d : parsed.calls) out += add_tool_use(d);
  }
  return out;
}

std::string MessagesWriter::failed() { return event("error", anthropic_error_body(api_error(*failure_))); }

std::string MessagesWriter::fail_unfinished(const RequestError& error) {
  if (finish_ || failure_) return "";
  failure_ = error;
  return failed();
}

std::string MessagesWriter::finish() {
  if (failure_) return "";
  std::string out = close_block();
  if (!request_.stream) return dump(message());
  out += event("message_delta", {{"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()}}},
                                 {"usage", {{"output_tokens", num_output_tokens_}}}});
  return out + event("message_stop", json::object());
}

}  // namespace flashserve
