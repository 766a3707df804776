// What a generation's HTTP answer is made of, whatever API shape it has (OpenAI chat and
// completions, OpenAI Responses, Anthropic Messages): GenerationJob feeds engine events in and
// sends what comes out, streamed as SSE or as one JSON document at the end.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "server/openai_json.h"
#include "server/serving.h"

namespace flashserve {

// One engine event of choice `choice` (index into the response's choices).
struct ChoiceEvent {
  int32_t choice;
  RequestOutput output;
};

class ApiWriter {
 public:
  virtual ~ApiWriter() = default;
  // Streaming: the SSE events for these engine events, after the stream's opening ones the first
  // time. Otherwise: records them, returns nothing.
  virtual std::string add(const std::vector<ChoiceEvent>& events) = 0;
  // Ends every unfinished choice with `error` (the server is stopping); streaming, the events saying so.
  virtual std::string fail_unfinished(const RequestError& error) = 0;
  // Set once a choice was ended by the server (shutdown, overload, engine failure): the answer ends.
  virtual const std::optional<RequestError>& failure() const = 0;
  // Whether any choice produced a token (after that, a failure can no longer change the status).
  virtual bool produced_tokens() const = 0;
  // The rest once every choice finished (or failed): a stream's closing events, or the whole body
  // (an error body if failed).
  virtual std::string finish() = 0;
  // The body of an error answer, in this API's shape.
  virtual json error_json(const ApiError& e) const { return error_body(e); }
};

// The error a client is told when the server ended its request with an abort: we cancel only for
// clients that are gone, so an abort that reaches a client is the server's.
RequestError server_abort_error(const RequestOutput& o);

// "data: <json>\n\n"
std::string sse_event(const json& j);
// "event: <name>\ndata: <json>\n\n": the named events of the Responses and Messages streams.
std::string sse_event(const std::string& name, const json& j);
// JSON text; invalid UTF-8 (never expected) becomes U+FFFD rather than an exception.
std::string dump(const json& j);
// `prefix` and 24 random hex digits: the ids of responses, messages and calls.
std::string random_id(const char* prefix);

}  // namespace flashserve
