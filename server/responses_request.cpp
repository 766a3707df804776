#include "server/responses_request.h"

#include <set>
#include <string_view>

namespace flashserve {
namespace {

// Fields the chat parser reads as they are (their rules are the same on both endpoints).
const std::set<std::string_view> kChatFields = {
    "model", "temperature", "top_p", "stream", "parallel_tool_calls", "metadata", "user", "safety_identifier",
    "prompt_cache_key", "service_tier",
    // our sampling extensions, as on chat
    "top_k", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty", "seed", "priority", "logit_bias",
    "chat_template_kwargs", "reasoning_budget"};
// Read here.
const std::set<std::string_view> kOwnFields = {
    "input", "instructions", "max_output_tokens", "tools", "tool_choice", "text", "previous_response_id", "store",
    // accepted only with a value that asks for nothing (refuse_unsupported)
    "stream_options", "truncation", "reasoning", "include", "background", "top_logprobs", "max_tool_calls",
    "prompt_cache_retention"};

ApiError wrong_type(const std::string& key, const char* what) { return bad_request("'" + key + "' must be " + what, key); }

const std::string* opt_string(const json& obj, const char* key, const std::string& where) {
  const json* v = field(obj, key);
  if (!v) return nullptr;
  if (!v->is_string()) throw wrong_type(where, "a string");
  return &v->get_ref<const std::string&>();
}

const std::string& required_string(const json& obj, const char* key, const std::string& where) {
  const std::string* s = opt_string(obj, key, where + "." + key);
  if (!s) throw bad_request("'" + where + "." + key + "' is required", "input");
  return *s;
}

void refuse_unless(const json& body, const char* key, bool (*asks_nothing)(const json&), const std::string& why) {
  const json* v = field(body, key);
  if (v && !asks_nothing(*v)) {
    throw bad_request("'" + std::string(key) + "' is not supported: " + why, key, "unsupported_parameter");
  }
}

bool all_null(const json& v) {
  if (!v.is_object()) return false;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_null()) return false;
  }
  return true;
}

void refuse_unsupported(const json& body) {
  refuse_unless(body, "truncation", [](const json& v) { return v == "disabled"; },
                "only \"disabled\": a conversation too long for the context window is refused, not cut");
  refuse_unless(body, "reasoning", all_null, "this server runs no reasoning settings");
  refuse_unless(body, "include", [](const json& v) { return v.is_array() && v.empty(); },
                "no extra output (logprobs, reasoning text, tool sources) is available");
  refuse_unless(body, "background", [](const json& v) { return v == false; }, "responses run while the request waits");
  refuse_unless(body, "top_logprobs", [](const json& v) { return v == 0; }, "logprobs are not reported here");
  refuse_unless(body, "max_tool_calls", [](const json&) { return false; }, "calls are not counted across a response");
  refuse_unless(body, "prompt_cache_retention", [](const json& v) { return v == "in_memory"; },
                "the prefix cache lives in memory only");
  refuse_unless(body, "stream_options", [](const json& v) { return v.is_object() && v.value("include_obfuscation", true) == false && v.size() == 1; },
                "only {\"include_obfuscation\": false}: stream events are not padded");
}

// A message's content: a string, or text parts (input_text, output_text).
std::string content_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("'" + where + ".content' must be a string or an array of text parts", "input");
  std::string text;
  for (const json& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type != "input_text" && type != "output_text") {
      throw bad_request("'" + where + ".content' may hold only input_text and output_text parts, not '" + type + "'",
                        "input");
    }
    text += required_string(part, "text", where + ".content[]");
  }
  return text;
}

// An assistant turn holding only reasoning so far: the message or calls that follow complete it.
bool opens_turn(const json& messages) {
  if (messages.empty()) return false;
  const json& last = messages.back();
  return last["role"] == "assistant" && last.contains("reasoning_content") && last["content"] == "" &&
         !last.contains("tool_calls");
}

// A reasoning item's content: reasoning_text parts (its summary is not part of the conversation).
std::string reasoning_text(const json& content, const std::string& where) {
  if (!content.is_array()) throw bad_request("'" + where + ".content' must be an array of reasoning_text parts", "input");
  std::string text;
  for (const json& part : content) {
    if (!part.is_object() || part.value("type", json()) != "reasoning_text") {
      throw bad_request("'" + where + ".content' may hold only reasoning_text parts", "input");
    }
    text += required_string(part, "text", where + ".content[]");
  }
  return text;
}

// A function call the model made, as the response gave it, joined to the assistant message before
// it (the chat template renders a turn's calls together).
void add_call(json& messages, const json& item, const std::string& where) {
  only_keys(item, {"type", "call_id", "name", "arguments", "id", "status"}, where, "input");
  json call = {{"id", required_string(item, "call_id", where)},
               {"type", "function"},
               {"function", {{"name", required_string(item, "name", where)},
                             {"arguments", required_string(item, "arguments", where)}}}};
  if (messages.empty() || messages.back()["role"] != "assistant") {
    messages.push_back({{"role", "assistant"}, {"content", ""}});
  }
  messages.back()["tool_calls"].push_back(std::move(call));
}

// The input's items appended to `messages` (those of the continued response, if any).
void add_input(const json& input, const Serving& serving, json& messages) {
  if (input.is_string()) {
    messages.push_back({{"role", "user"}, {"content", input}});
    return;
  }
  if (!input.is_array() || input.empty()) throw wrong_type("input", "a string or a non-empty array of input items");
  // Every item adds at least one token: more than the context window holds can never fit.
  if (input.size() > size_t(serving.max_model_len())) {
    throw bad_request("'input' has more items than the context window of " + std::to_string(serving.max_model_len()) +
                          " tokens can hold",
                      "input", "context_length_exceeded");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const json& item = input[i];
    const std::string where = "input[" + std::to_string(i) + "]";
    if (!item.is_object()) throw wrong_type(where, "an object");
    const std::string type = item.contains("type") ? required_string(item, "type", where) : "message";
    if (type == "message") {
      only_keys(item, {"type", "role", "content", "id", "status"}, where, "input");
      const std::string& role = required_string(item, "role", where);
      if (role != "user" && role != "assistant" && role != "system" && role != "developer") {
        throw bad_request("'" + where + ".role' must be user, assistant, system or developer", "input");
      }
      const json* content = field(item, "content");
      if (!content) throw bad_request("'" + where + ".content' is required", "input");
      if (role == "assistant" && opens_turn(messages)) {
        messages.back()["content"] = content_text(*content, where);  // after its reasoning: the same turn
      } else {
        messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", content_text(*content, where)}});
      }
    } else if (type == "reasoning") {
      only_keys(item, {"type", "id", "summary", "content", "status"}, where, "input");
      const json* content = field(item, "content");
      messages.push_back({{"role", "assistant"}, {"content", ""},
                          {"reasoning_content", content ? reasoning_text(*content, where) : ""}});
    } else if (type == "function_call") {
      add_call(messages, item, where);
    } else if (type == "function_call_output") {
      only_keys(item, {"type", "call_id", "output", "id", "status"}, where, "input");
      const json* output = field(item, "output");
      if (!output) throw bad_request("'" + where + ".output' is required", "input");
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", required_string(item, "call_id", where)},
                          {"content", content_text(*output, where)}});
    } else {
      throw bad_request("'" + where + ".type' '" + type +
                            "' is not supported: input items are messages, reasoning, function_call and "
                            "function_call_output",
                        "input", "unsupported_parameter");
    }
  }
}

// Function tools, flat as the Responses API writes them, in the chat API's nesting.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array of function tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || t.value("type", json()) != "function") {
      throw bad_request("'" + where + ".type' must be 'function' (the only kind of tool this server runs)", "tools");
    }
    only_keys(t, {"type", "name", "description", "parameters", "strict"}, where, "tools");
    json fn = t;
    fn.erase("type");
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

json chat_tool_choice(const json& choice) {
  if (choice.is_string()) return choice;
  if (choice.is_object() && choice.value("type", json()) == "function") {
    only_keys(choice, {"type", "name"}, "tool_choice", "tool_choice");
    const std::string* name = opt_string(choice, "name", "tool_choice.name");
    if (!name) throw bad_request("'tool_choice.name' is required", "tool_choice");
    return {{"type", "function"}, {"function", {{"name", *name}}}};
  }
  throw bad_request("'tool_choice' must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}",
                    "tool_choice");
}

// text: {format: {type: text | json_object | json_schema, ...}, verbosity} -> response_format.
void translate_text(const json& text, json& chat) {
  if (!text.is_object()) throw wrong_type("text", "an object");
  only_keys(text, {"format", "verbosity"}, "text", "text");
  if (const json* v = field(text, "verbosity")) chat["verbosity"] = *v;
  const json* format = field(text, "format");
  if (!format) return;
  if (!format->is_object()) throw wrong_type("text.format", "an object");
  const json type = format->value("type", json());
  if (type == "text") {
    only_keys(*format, {"type"}, "text.format", "text.format");
  } else if (type == "json_object") {
    only_keys(*format, {"type"}, "text.format", "text.format");
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    only_keys(*format, {"type", "name", "schema", "description", "strict"}, "text.format", "text.format");
    json schema = *format;
    schema.erase("type");
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  } else {
    throw bad_request("'text.format.type' must be text, json_object or json_schema", "text.format");
  }
}

bool wants_store(const json& body, const ResponseStore& store) {
  const json* v = field(body, "store");
  if (v && !v->is_boolean()) throw wrong_type("store", "a boolean");
  if (v && v->get<bool>() && !store.enabled()) {
    throw bad_request("'store' is not available: this server keeps no responses (--max-stored-responses 0)", "store",
                      "unsupported_parameter");
  }
  return v ? v->get<bool>() : store.enabled();  // OpenAI stores by default
}

json previous_conversation(const json& body, ResponseStore& store) {
  const std::string* id = opt_string(body, "previous_response_id", "previous_response_id");
  if (!id) return json::array();
  if (!store.enabled()) {
    throw bad_request("'previous_response_id' is not available: this server keeps no responses "
                      "(--max-stored-responses 0); send the whole conversation as 'input'",
                      "previous_response_id", "unsupported_parameter");
  }
  std::optional<StoredResponse> previous = store.get(*id);
  if (!previous) {
    throw bad_request("Previous response with id '" + *id + "' not found (never stored, deleted or evicted)",
                      "previous_response_id", "previous_response_not_found");
  }
  return std::move(previous->conversation);
}

// The chat parser names chat fields in its errors; the client wrote these.
void rename_param(ApiError& e) {
  if (e.param == "messages") e.param = "input";
  if (e.param == "max_completion_tokens") e.param = "max_output_tokens";
  if (e.param == "response_format") e.param = "text.format";
}

json echo(const json& body, const GenerationRequest& r, bool store, const std::string& model) {
  auto given = [&](const char* key, json fallback) {
    const json* v = field(body, key);
    return v ? *v : fallback;
  };
  json format = {{"type", "text"}};
  if (const json* text = field(body, "text"); text && field(*text, "format")) format = (*text)["format"];
  return {{"instructions", given("instructions", nullptr)},
          {"max_output_tokens", given("max_output_tokens", nullptr)},
          {"model", model},
          {"parallel_tool_calls", given("parallel_tool_calls", true)},
          {"previous_response_id", given("previous_response_id", nullptr)},
          {"reasoning", {{"effort", nullptr}, {"summary", nullptr}}},
          {"store", store},
          {"temperature", r.params.temperature},
          {"top_p", r.params.top_p},
          {"text", {{"format", std::move(format)}, {"verbosity", "medium"}}},
          {"tool_choice", given("tool_choice", "auto")},
          {"tools", given("tools", json::array())},
          {"truncation", "disabled"},
          {"metadata", given("metadata", json::object())},
          {"user", given("user", nullptr)},
          {"background", false},
          {"max_tool_calls", nullptr},
          {"top_logprobs", 0}};
}

}  // namespace

ResponsesRequest parse_responses_request(const json& body, const Serving& serving, ResponseStore& store,
                                         const std::function<bool()>& cancelled) {
  json chat = json::object();
  for (const auto& [key, value] : body.items()) {
    if (kChatFields.count(key)) {
      chat[key] = value;
    } else if (!kOwnFields.count(key)) {
      throw bad_request("Unrecognized request argument supplied: " + key, key, "unsupported_parameter");
    }
  }
  refuse_unsupported(body);
  if (const json* v = field(body, "max_output_tokens")) {
    if (!v->is_number_integer()) throw wrong_type("max_output_tokens", "an integer");
    chat["max_completion_tokens"] = *v;
  }
  if (const json* v = field(body, "tools")) chat["tools"] = chat_tools(*v);
  if (const json* v = field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*v);
  if (const json* v = field(body, "text")) translate_text(*v, chat);

  ResponsesRequest r;
  r.store = wants_store(body, store);
  const json* input = field(body, "input");
  if (!input) throw bad_request("'input' is required", "input");
  r.conversation = previous_conversation(body, store);
  add_input(*input, serving, r.conversation);
  chat["messages"] = json::array();
  if (const std::string* instructions = opt_string(body, "instructions", "instructions")) {
    chat["messages"].push_back({{"role", "system"}, {"content", *instructions}});
  }
  for (const json& m : r.conversation) chat["messages"].push_back(m);
  try {
    r.generation = parse_chat_request(chat, serving, cancelled);
  } catch (ApiError& e) {
    rename_param(e);
    throw;
  }
  r.echo = echo(body, r.generation, r.store, serving.model_name());
  return r;
}

}  // namespace flashserve
