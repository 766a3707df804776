// Anthropic's Messages API request (POST /v1/messages, /v1/messages/count_tokens) read into what
// the chat endpoint would run: `system` becomes the system message, content blocks become chat
// messages (text joined, `tool_use` blocks an assistant's tool_calls, `tool_result` blocks `tool`
// messages), custom tools, `tool_choice` and `stop_sequences` their chat equivalents. The chat
// parser then checks sampling fields, compiles a forced call's grammar and tokenizes, so both
// endpoints share one set of rules. What this server cannot do (thinking, images, server tools, a
// prefilled assistant turn) is refused by name, as is any field it does not know.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "server/openai_protocol.h"

namespace flashserve {

struct MessagesRequest {
  GenerationRequest generation;             // a chat request
  std::vector<std::string> stop_sequences;  // the client's (the generation may stop on one of the server's too)
};

MessagesRequest parse_messages_request(const json& body, const Serving& serving,
                                       const std::function<bool()>& cancelled = {});

// POST /v1/messages/count_tokens: the prompt tokens the same request would have.
int64_t count_message_tokens(const json& body, const Serving& serving, const std::function<bool()>& cancelled = {});

}  // namespace flashserve
