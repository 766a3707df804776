// OpenAI response bodies from engine events: SSE chunks as the tokens come (stream), or one JSON
// document at the end. Framework-free, so the shapes can be tested without HTTP.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/openai_protocol.h"
#include "server/tool_call_parser.h"

namespace flashserve {

// One engine event of choice `choice` (index into the response's choices).
struct ChoiceEvent {
  int32_t choice;
  RequestOutput output;
};

class ResponseBuilder {
 public:
  ResponseBuilder(const GenerationRequest& request, const Tokenizer& tok, std::string model, std::string fingerprint);

  // Bytes to send before any event: a chat stream's role chunk per choice; else nothing.
  std::string start() const;
  // Streaming: the SSE chunks for these events. Otherwise: records them and returns nothing.
  std::string add(const std::vector<ChoiceEvent>& events);
  // Ends every unfinished choice with `error` (the server is stopping): streaming, a chunk with
  // finish_reason "abort" per choice and an error event.
  std::string fail_unfinished(const RequestError& error);
  // Set once a choice was ended by the server (shutdown, overload, engine failure): the response ends.
  const std::optional<RequestError>& failure() const { return failure_; }
  // Whether any choice produced a token (after that, a failure can no longer change the status).
  bool produced_tokens() const;
  // The rest once every choice finished (or failed): the usage chunk if asked, then [DONE]; or the
  // whole JSON body (an error body if failed).
  std::string finish() const;

 private:
  struct Choice {
    std::string text;                  // not streaming: everything so far
    std::vector<SampledToken> tokens;  // not streaming, with logprobs: every sampled token
    std::optional<FinishReason> finish;
    int32_t num_output_tokens = 0;
    int32_t num_cached_tokens = 0;
    size_t text_offset = 0;            // streaming completions: bytes before the next token
    std::optional<ToolCallParser> calls;  // streaming chat with tools: the output read for calls
    // Streaming chat with tools: the content stays null (as in the whole answer, chat_message) until
    // something but whitespace arrives; what came before is held here.
    std::string held_content;
    bool content_sent = false;
  };
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
};

// "data: <json>\n\n"
std::string sse_event(const json& j);
// JSON text; invalid UTF-8 (never expected) becomes U+FFFD rather than an exception.
std::string dump(const json& j);

}  // namespace flashserve
