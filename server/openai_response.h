// OpenAI response bodies from engine events: SSE chunks as the tokens come (stream), or one JSON
// document at the end. Framework-free, so the shapes can be tested without HTTP.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/openai_protocol.h"

namespace flashserve {

// One engine event of choice `choice` (index into the response's choices).
struct ChoiceEvent {
  int32_t choice;
  RequestOutput output;
};

class ResponseBuilder {
 public:
  ResponseBuilder(const GenerationRequest& request, const Tokenizer& tok, std::string model);

  // Bytes to send before any event: a chat stream's role chunk per choice; else nothing.
  std::string start() const;
  // Streaming: the SSE chunks for these events. Otherwise: records them and returns nothing.
  std::string add(const std::vector<ChoiceEvent>& events);
  // True once a choice was aborted by the server (shutdown, engine failure): the response ends.
  bool failed() const { return !error_.empty(); }
  // The rest once every choice finished (or failed): the usage chunk if asked and [DONE]; or the
  // whole JSON body (an error body if failed).
  std::string finish() const;

 private:
  struct Choice {
    std::string text;                  // not streaming: everything so far
    std::vector<SampledToken> tokens;  // not streaming, with logprobs: every sampled token
    std::optional<FinishReason> finish;
    int32_t num_output_tokens = 0;
    size_t text_offset = 0;            // streaming completions: bytes before the next token
  };
  json envelope(const char* object) const;
  json usage() const;
  std::string stream_chunks(const ChoiceEvent& e);
  json completion_chunk(int32_t index, const std::string& text, json logprobs, json finish_reason) const;
  json chat_chunk(int32_t index, json delta, json logprobs, json finish_reason) const;
  json logprobs_json(const std::vector<SampledToken>& tokens, size_t& text_offset) const;
  std::string final_body() const;

  const GenerationRequest& request_;
  const Tokenizer& tok_;
  std::string model_;
  std::string id_;
  int64_t created_;
  std::vector<Choice> choices_;
  std::string error_;
};

// "data: <json>\n\n"
std::string sse_event(const json& j);
// JSON text; invalid UTF-8 (never expected) becomes U+FFFD rather than an exception.
std::string dump(const json& j);

}  // namespace flashserve
