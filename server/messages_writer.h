// Anthropic's Messages API answer (a `message` object) from engine events: content blocks
// (thinking, text, tool_use) built as the tokens come, sent as the named stream events (message_start,
// content_block_start / _delta / _stop, message_delta, message_stop) or as one object at the end.
// Errors, whole answers or mid-stream events, take Anthropic's shape.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/api_writer.h"
#include "server/openai_protocol.h"
#include "server/output_splitter.h"

namespace flashserve {

// {"type": "error", "error": {"type", "message"}}, the error type named by the HTTP status as
// Anthropic names it (400 invalid_request_error, 401 authentication_error, 429 rate_limit_error,
// 503 overloaded_error, ...).
json anthropic_error_body(const ApiError& e);

class MessagesWriter : public ApiWriter {
 public:
  // `stop_sequences`: the client's (MessagesRequest's); `model`: the name the answer gives.
  MessagesWriter(const GenerationRequest& request, std::vector<std::string> stop_sequences, std::string model);

  std::string add(const std::vector<ChoiceEvent>& events) override;
  // Streaming: an `error` event.
  std::string fail_unfinished(const RequestError& error) override;
  const std::optional<RequestError>& failure() const override { return failure_; }
  bool produced_tokens() const override { return num_output_tokens_ > 0; }
  // Streaming: the open block closed, message_delta (why it stopped, output tokens), message_stop.
  // Otherwise the message object.
  std::string finish() override;
  json error_json(const ApiError& e) const override { return anthropic_error_body(e); }

 private:
  std::string event(const char* type, json payload);
  std::string start();
  std::string add_thinking(const std::string& text);
  std::string add_text(const std::string& text);
  std::string add_tool_use(const ToolCallDelta& d);
  std::string open_block(json block);
  std::string close_block();
  std::string failed();
  json message() const;
  json usage() const;
  json stop_reason() const;
  json stop_sequence() const;

  const GenerationRequest& request_;
  std::vector<std::string> stop_sequences_;
  std::string model_;
  std::string id_;
  OutputSplitter splitter_;
  json content_ = json::array();  // the blocks so far; the last one is open while block_open_
  bool block_open_ = false;
  std::string input_text_;        // the open tool_use block's input, as JSON text so far
  int32_t num_tool_uses_ = 0;
  bool started_ = false;
  int32_t num_output_tokens_ = 0, num_cached_tokens_ = 0;
  std::optional<FinishReason> finish_;
  std::optional<std::string> stop_sequence_;  // the client's stop sequence that ended the answer
  std::optional<RequestError> failure_;
};

}  // namespace flashserve
