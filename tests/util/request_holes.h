// Every field each OpenAI route reads, and the places inside messages, tool calls, tools and schemas
// where a value is walked further, as request bodies with a hole where a hostile value goes: what
// tests/server/test_hostile_input.cpp fills with nesting a million deep, and what
// tests/fuzz/fuzz_request_shapes.cpp fills with every shape it makes.
#pragma once
#include <string>
#include <vector>

namespace flashserve::test {

inline const std::string kHole = "\"@HOLE@\"";

struct RouteHoles {
  const char* path;
  std::vector<std::string> requests;  // JSON bodies, each holding kHole once
};

// `request` with its hole filled by `value` (JSON text).
inline std::string fill_hole(std::string request, const std::string& value) {
  request.replace(request.find(kHole), kHole.size(), value);
  return request;
}

// /v1/completions, /v1/chat/completions, /tokenize, /detokenize, in that order.
inline std::vector<RouteHoles> route_holes() {
  auto fields = [](const std::string& base, const std::vector<const char*>& names) {
    std::vector<std::string> out;
    for (const char* f : names) out.push_back("{" + base + ", \"" + f + "\": " + kHole + "}");
    return out;
  };
  const std::vector<const char*> common = {
      "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "presence_penalty",
      "frequency_penalty", "logit_bias", "seed", "user", "top_k", "min_p", "repetition_penalty", "ignore_eos",
      "stop_token_ids", "priority", "max_completion_tokens", "response_format", "grammar", "regex", "unknown_field"};
  std::vector<const char*> completion = common, chat = common;
  for (const char* f : {"logprobs", "echo", "suffix", "best_of"}) completion.push_back(f);
  for (const char* f : {"logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "functions",
                        "function_call", "store", "metadata", "service_tier", "modalities", "audio", "prediction",
                        "reasoning_effort", "web_search_options"}) {
    chat.push_back(f);
  }
  RouteHoles completions{"/v1/completions", fields("\"prompt\": \"hi\", \"max_tokens\": 2", completion)};
  completions.requests.push_back("{\"prompt\": " + kHole + "}");
  completions.requests.push_back("{\"prompt\": [" + kHole + "]}");
  const std::string msg = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 2";
  RouteHoles chats{"/v1/chat/completions", fields(msg, chat)};
  for (const std::string& m : {
           "{\"role\": \"user\", \"content\": " + kHole + "}",
           "{\"role\": \"user\", \"content\": [" + kHole + "]}",
           "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": " + kHole + "}]}",
           "{\"role\": \"user\", \"content\": \"hi\", \"unknown\": " + kHole + "}",
           "{\"role\": " + kHole + ", \"content\": \"hi\"}",
           "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": " + kHole + "}",
           "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"1\", \"type\": \"function\", "
           "\"function\": {\"name\": \"f\", \"arguments\": " + kHole + "}}]}",
           "{\"role\": \"tool\", \"tool_call_id\": " + kHole + ", \"content\": \"x\"}",
       }) {
    chats.requests.push_back("{\"messages\": [" + m + "], \"max_tokens\": 2}");
  }
  chats.requests.push_back("{\"messages\": " + kHole + "}");
  chats.requests.push_back("{" + msg + ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                           "\"parameters\": " + kHole + "}}], \"tool_choice\": \"required\"}");
  chats.requests.push_back("{" + msg + ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                           "{\"name\": \"x\", \"schema\": {\"anyOf\": [" + kHole + "]}}}}");
  chats.requests.push_back("{" + msg + ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                           "{\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": " + kHole +
                           "}}}}}");
  RouteHoles tokenize{"/tokenize", {"{\"prompt\": " + kHole + "}", "{\"messages\": " + kHole + "}",
                                    "{\"prompt\": \"hi\", \"add_special_tokens\": " + kHole + "}",
                                    "{\"prompt\": \"hi\", \"model\": " + kHole + "}"}};
  RouteHoles detokenize{"/detokenize", {"{\"tokens\": " + kHole + "}", "{\"tokens\": [1], \"model\": " + kHole + "}"}};
  return {completions, chats, tokenize, detokenize};
}

}  // namespace flashserve::test
