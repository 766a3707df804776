#include "server/responses_writer.h"

#include <ctime>

namespace flashserve {

ResponsesWriter::ResponsesWriter(const GenerationRequest& request, json echo, json conversation, ResponseStore* store)
    : request_(request),
      echo_(std::move(echo)),
      conversation_(std::move(conversation)),
      store_(store),
      id_(random_id("resp_")),
      created_at_(int64_t(std::time(nullptr))),
      splitter_(request.tools, request.reasoning) {}

// Numbered, as the SDK's stream reader expects; nothing when not streaming (the items still grow).
std::string ResponsesWriter::event(const char* type, json payload) {
  if (!request_.stream) return "";
  json e = {{"type", type}, {"sequence_number", sequence_++}};
  e.update(payload);
  return sse_event(type, e);
}

json ResponsesWriter::usage() const {
  const int64_t input = int64_t(request_.prompts[0].size());
  return {{"input_tokens", input},
          {"input_tokens_details", {{"cached_tokens", num_cached_tokens_}}},
          {"output_tokens", num_output_tokens_},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", input + num_output_tokens_}};
}

json ResponsesWriter::response(const char* status) const {
  const bool done = std::string_view(status) != "in_progress";
  json r = {{"id", id_}, {"object", "response"}, {"created_at", created_at_}, {"status", status}, {"error", nullptr},
            {"incomplete_details", nullptr}};
  r.update(echo_);
  r["output"] = done ? items_ : json::array();
  r["usage"] = done ? usage() : json(nullptr);
  if (std::string_view(status) == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (failure_) r["error"] = {{"code", "server_error"}, {"message", failure_->message}};
  return r;
}

std::string ResponsesWriter::open_message() {
  items_.push_back({{"id", random_id("msg_")},
                    {"type", "message"},
                    {"status", "in_progress"},
                    {"role", "assistant"},
                    {"content", json::array()}});
  item_open_ = true;
  const json& item = items_.back();
  const json index = items_.size() - 1;
  std::string out = event("response.output_item.added", {{"output_index", index}, {"item", item}});
  json part = {{"type", "output_text"}, {"text", ""}, {"annotations", json::array()}, {"logprobs", json::array()}};
  out += event("response.content_part.added",
               {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  items_.back()["content"].push_back(std::move(part));
  return out;
}

std::string ResponsesWriter::add_text(const std::string& text) {
  std::string out;
  if (!item_open_ || items_.back()["type"] != "message") {
    out += close_item("completed");
    out += open_message();
  }
  json& item = items_.back();
  json& part = item["content"][0];
  part["text"] = part["text"].get<std::string>() + text;
  return out + event("response.output_text.delta", {{"item_id", item["id"]},
                                                    {"output_index", items_.size() - 1},
                                                    {"content_index", 0},
                                                    {"delta", text},
                                                    {"logprobs", json::array()}});
}

// A reasoning model's reasoning, as a reasoning item with its text (there is no summary).
std::string ResponsesWriter::add_reasoning(const std::string& text) {
  std::string out;
  if (!item_open_ || items_.back()["type"] != "reasoning") {
    out += close_item("completed");
    items_.push_back({{"id", random_id("rs_")},
                      {"type", "reasoning"},
                      {"status", "in_progress"},
                      {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", ""}}})}});
    item_open_ = true;
    out += event("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", items_.back()}});
  }
  json& item = items_.back();
  json& part = item["content"][0];
  part["text"] = part["text"].get<std::string>() + text;
  return out + event("response.reasoning_text.delta",
                     {{"item_id", item["id"]}, {"output_index", items_.size() - 1}, {"content_index", 0}, {"delta", text}});
}

std::string ResponsesWriter::add_call(const ToolCallDelta& d) {
  std::string out;
  if (d.first) {
    out += close_item("completed");
    items_.push_back({{"id", random_id("fc_")},
                      {"type", "function_call"},
                      {"status", "in_progress"},
                      {"call_id", random_id("call_")},
                      {"name", d.name},
                      {"arguments", ""}});
    item_open_ = true;
    out += event("response.output_item.added", {{"output_index", items_.size() - 1}, {"item", items_.back()}});
  }
  if (d.arguments.empty()) return out;
  json& item = items_.back();
  item["arguments"] = item["arguments"].get<std::string>() + d.arguments;
  return out + event("response.function_call_arguments.delta",
                     {{"item_id", item["id"]}, {"output_index", items_.size() - 1}, {"delta", d.arguments}});
}

std::string ResponsesWriter::close_item(const char* status) {
  if (!item_open_) return "";
  item_open_ = false;
  json& item = items_.back();
  item["status"] = status;
  const json index = items_.size() - 1;
  std::string out;
  if (item["type"] == "message") {
    const json& part = item["content"][0];
    out += event("response.output_text.done", {{"item_id", item["id"]},
                                               {"output_index", index},
                                               {"content_index", 0},
                                               {"text", part["text"]},
                                               {"logprobs", json::array()}});
    out += event("response.content_part.done",
                 {{"item_id", item["id"]}, {"output_index", index}, {"content_index", 0}, {"part", part}});
  } else if (item["type"] == "reasoning") {
    out += event("response.reasoning_text.done", {{"item_id", item["id"]},
                                                  {"output_index", index},
                                                  {"content_index", 0},
                                                  {"text", item["content"][0]["text"]}});
  } else {
    out += event("response.function_call_arguments.done",
                 {{"item_id", item["id"]}, {"output_index", index}, {"name", item["name"]}, {"arguments", item["arguments"]}});
  }
  return out + event("response.output_item.done", {{"output_index", index}, {"item", item}});
}

std::string ResponsesWriter::add(const std::vector<ChoiceEvent>& events) {
  std::string out;
  if (!started_) {
    started_ = true;
    out += event("response.created", {{"response", response("in_progress")}});
    out += event("response.in_progress", {{"response", response("in_progress")}});
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
    const OutputParts parsed = splitter_.feed(o.text, o.finish.has_value());
    if (!parsed.reasoning.empty()) out += add_reasoning(parsed.reasoning);
    if (!parsed.content.empty()) out += add_text(parsed.content);
    for (const ToolCallDelta& d : parsed.calls) out += add_call(d);
  }
  return out;
}

std::string ResponsesWriter::failed() {
  return close_item("incomplete") + event("response.failed", {{"response", response("failed")}});
}

std::string ResponsesWriter::fail_unfinished(const RequestError& error) {
  if (finish_ || failure_) return "";
  failure_ = error;
  return failed();
}

// The answer as a chat message, for a later request that continues from this response.
json ResponsesWriter::assistant_turn() const {
  json turn = {{"role", "assistant"}, {"content", ""}};
  for (const json& item : items_) {
    if (item["type"] == "message") {
      turn["content"] = turn["content"].get<std::string>() + item["content"][0]["text"].get<std::string>();
    } else if (item["type"] == "reasoning") {
      turn["reasoning_content"] = item["content"][0]["text"];
    } else {
      turn["tool_calls"].push_back(
          {{"id", item["call_id"]}, {"type", "function"}, {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    }
  }
  return turn;
}

std::string ResponsesWriter::finish() {
  if (failure_) return "";
  const char* status = finish_ == FinishReason::Length ? "incomplete" : "completed";
  std::string out = close_item(status);
  if (items_.empty()) out += open_message() + close_item(status);  // an empty answer is still a message
  const json r = response(status);
  if (store_) {
    json conversation = conversation_;
    conversation.push_back(assistant_turn());
    store_->put(id_, {std::move(conversation), r});
  }
  if (!request_.stream) return dump(r);
  return out + event(finish_ == FinishReason::Length ? "response.incomplete" : "response.completed", {{"response", r}});
}

}  // namespace flashserve
