// OpenAI response bodies from engine events: SSE chunks as the tokens come (stream), or one JSON
// document at the end. Framework-free, so the shapes can be tested without HTTP.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/api_writer.h"
#include "server/openai_protocol.h"
#include "server/tool_call_parser.h"

namespace flashserve {

// OpenAI's /v1/completions and /v1/chat/completions shapes.
class ResponseBuilder : public ApiWriter {
 public:
  ResponseBuilder(const GenerationRequest& request, const Tokenizer& tok, std::string model, std::string fingerprint);

  // A chat stream opens with a role chunk per choice.
  std::string add(const std::vector<ChoiceEvent>& events) override;
  // Streaming: a chunk with finish_reason "abort" per unfinished choice, then an error event.
  std::string fail_unfinished(const RequestError& error) override;
  const std::optional<RequestError>& failure() const override { return failure_; }
  bool produced_tokens() const override;
  // Streaming: the usage chunk if asked, then [DONE].
  std::string finish() override;

 private:
  struct Choice {
    std::string text;                  // not streaming: everything so far
    std::vector<SampledToken> tokens;  // not streaming, with logprobs: every sampled token
    std::optional<FinishReason> finish;
    int32_t num_output_tokens = 0;
    int32_t num_cached_tokens = 0;
    size_t text_offset = 0;            // streaming completions: bytes before the next token
    std::optional<ToolCallParser> calls;  // streaming chat with tools: the output read for calls
    std::optional<ReasoningSplitter> reasoning;  // streaming chat with a reasoning model
    // Streaming chat with tools: the content stays null (as in the whole answer, chat_message) until
    // something but whitespace arrives; what came before is held here.
    std::string held_content;
    bool content_sent = false;
  };
  std::string role_chunks() const;
  std::string abort_chunk(int32_t choice) const;
  std::string error_event() const;
  json envelope(const char* object) const;
  json usage() const;
  std::string stream_chunks(const ChoiceEvent& e);
  json completion_chunk(int32_t index, const std::string& text, json logprobs, json finish_reason) const;
  json chat_chunk(int32_t index, json delta, json logprobs, json finish_reason) const;
  json logprobs_json(const std::vector<SampledToken>& tokens, size_t& text_offset) const;
  json tool_call_delta(const ToolCallDelta& d) const;
  json chat_message(const Choice& c) const;
  json choice_finish_reason(const Choice& c, int32_t num_calls) const;
  std::string final_body() const;

  const GenerationRequest& request_;
  const Tokenizer& tok_;
  std::string model_;
  std::string fingerprint_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;
  std::optional<RequestError> failure_;
  bool started_ = false;
};

}  // namespace flashserve
