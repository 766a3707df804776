// The Responses API's answer (OpenAI's `response` object) from engine events: output items (an
// assistant message with output_text, function calls) built as the tokens come, sent as the
// numbered stream events (response.created ... response.completed) or as one object at the end.
// A finished response is kept in the store when the request asked for it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/api_writer.h"
#include "server/openai_protocol.h"
#include "server/output_splitter.h"
#include "server/response_store.h"

namespace flashserve {

class ResponsesWriter : public ApiWriter {
 public:
  // `echo`, `conversation`: ResponsesRequest's; `store` null: the response is not kept.
  ResponsesWriter(const GenerationRequest& request, json echo, json conversation, ResponseStore* store);

  std::string add(const std::vector<ChoiceEvent>& events) override;
  // Streaming: response.failed.
  std::string fail_unfinished(const RequestError& error) override;
  const std::optional<RequestError>& failure() const override { return failure_; }
  bool produced_tokens() const override { return num_output_tokens_ > 0; }
  // Streaming: the open item closed, then response.completed (response.incomplete when max_output_tokens
  // cut it). Otherwise the response object.
  std::string finish() override;

  const std::string& id() const { return id_; }

 private:
  std::string event(const char* type, json payload);
  std::string add_reasoning(const std::string& text);
  std::string add_text(const std::string& text);
  std::string add_call(const ToolCallDelta& d);
  std::string open_message();
  std::string close_item(const char* status);
  std::string failed();
  json response(const char* status) const;
  json usage() const;
  json assistant_turn() const;

  const GenerationRequest& request_;
  json echo_, conversation_;
  ResponseStore* store_;
  std::string id_;
  int64_t created_at_;
  OutputSplitter splitter_;
  json items_ = json::array();  // output items; the last one is open while item_open_
  bool item_open_ = false;
  int64_t sequence_ = 0;
  bool started_ = false;
  int32_t num_output_tokens_ = 0, num_cached_tokens_ = 0;
  std::optional<FinishReason> finish_;
  std::optional<RequestError> failure_;
};

}  // namespace flashserve
