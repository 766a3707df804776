// OpenAI's Responses API request (POST /v1/responses) read into what the chat endpoint would run:
// `instructions` become the system message, `input` items (messages, function calls and their
// outputs) become chat messages after those of the response it continues (`previous_response_id`),
// function tools, `tool_choice` and `text.format` their chat equivalents. The chat parser then
// checks sampling fields, compiles the format's grammar and tokenizes, so both endpoints share one
// set of rules. Fields are refused by name as on chat.
#pragma once
#include <functional>
#include <string>
#include "server/openai_protocol.h"
#include "server/response_store.h"

namespace flashserve {

struct ResponsesRequest {
  GenerationRequest generation;  // a chat request
  json conversation;             // chat messages: the continued response's, then this input's
  json echo;                     // the settings the response object repeats back
  bool store = false;            // keep the finished response (previous_response_id, GET)
};

// `store` is the server's (off: a request asking for storing or continuing is refused).
ResponsesRequest parse_responses_request(const json& body, const Serving& serving, ResponseStore& store,
                                         const std::function<bool()>& cancelled = {});

}  // namespace flashserve
