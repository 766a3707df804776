#include "server/messages_request.h"

#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace flashserve {
namespace {

// Fields the chat parser reads as they are (their rules are the same on both endpoints).
const std::set<std::string_view> kChatFields = {"model", "max_tokens", "top_p", "top_k", "stream"};
// Every field POST /v1/messages takes (those not in kChatFields are read here).
const std::set<std::string_view> kCreateFields = {"model",       "max_tokens", "top_p",         "top_k",
                                                  "stream",      "messages",   "system",        "stop_sequences",
                                                  "temperature", "tools",      "tool_choice",   "metadata",
                                                  "thinking",    "cache_control", "service_tier"};
// count_tokens takes what shapes the prompt.
const std::set<std::string_view> kCountFields = {"model", "messages", "system", "tools", "tool_choice", "thinking",
                                                 "cache_control"};

ApiError wrong_type(const std::string& key, const char* what) { return bad_request("'" + key + "' must be " + what, key); }

std::string at(const std::string& where, size_t i) { return where + "[" + std::to_string(i) + "]"; }
// The name of `key` inside `where` (empty: the body itself).
std::string path(const std::string& where, const char* key) { return where.empty() ? key : where + "." + key; }

const std::string& required_string(const json& obj, const char* key, const std::string& where) {
  const json* v = field(obj, key);
  if (!v) throw bad_request("'" + path(where, key) + "' is required", where);
  if (!v->is_string()) throw wrong_type(path(where, key), "a string");
  return v->get_ref<const std::string&>();
}

// A prompt-caching hint, checked for its shape: the prefix cache finds shared prompts by their
// content, whatever is marked.
void check_cache_control(const json& obj, const std::string& where) {
  const json* c = field(obj, "cache_control");
  if (!c) return;
  const std::string name = path(where, "cache_control");
  const json ttl = c->is_object() ? c->value("ttl", json("5m")) : json();
  if (!c->is_object() || c->value("type", json()) != "ephemeral" || (ttl != "5m" && ttl != "1h")) {
    throw bad_request("'" + name + "' must be {\"type\": \"ephemeral\", \"ttl\": \"5m\" | \"1h\"}", name);
  }
  only_keys(*c, {"type", "ttl"}, name, name);
}

const std::string& block_type(const json& block, const std::string& where) {
  if (!block.is_object()) throw wrong_type(where, "a content block object");
  return required_string(block, "type", where);
}

ApiError unsupported_block(const std::string& type, const std::string& where, const char* allowed) {
  const char* why = type == "thinking" || type == "redacted_thinking"
                        ? "thinking goes in assistant turns, and this server writes no redacted thinking"
                        : (type == "image" || type == "document") ? "this server runs text-only models"
                                                                  : allowed;
  return bad_request("'" + where + ".type' '" + type + "' is not supported here: " + why, where,
                     "unsupported_parameter");
}

std::string text_of(const json& block, const std::string& where) {
  only_keys(block, {"type", "text", "cache_control", "citations"}, where, where);
  check_cache_control(block, where);
  if (const json* c = field(block, "citations"); c && !(c->is_array() && c->empty())) {
    throw bad_request("'" + where + ".citations' is not supported: this server cites no documents", where,
                      "unsupported_parameter");
  }
  return required_string(block, "text", where);
}

// A string, or text blocks joined (system prompts, tool results).
std::string joined_text(const json& content, const std::string& where) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw wrong_type(where, "a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string& type = block_type(content[i], at(where, i));
    if (type != "text") throw unsupported_block(type, at(where, i), "only text blocks are allowed");
    text += text_of(content[i], at(where, i));
  }
  return text;
}

// A tool_result block as the chat API's `tool` message answering the call it names.
json tool_message(const json& block, const std::string& where) {
  only_keys(block, {"type", "tool_use_id", "content", "is_error", "cache_control"}, where, where);
  check_cache_control(block, where);
  const std::string& id = required_string(block, "tool_use_id", where);
  const json* content = field(block, "content");
  std::string text = content ? joined_text(*content, where + ".content") : "";
  const json* is_error = field(block, "is_error");
  if (is_error && !is_error->is_boolean()) throw wrong_type(where + ".is_error", "a boolean");
  // A chat message has no error flag: the model learns of the failure from the text.
  if (is_error && is_error->get<bool>()) text = "Error: " + text;
  return {{"role", "tool"}, {"tool_call_id", id}, {"content", std::move(text)}};
}

// A tool_use block (a call the model made earlier) as a chat tool call: the input becomes the
// arguments' JSON text.
json tool_call(const json& block, const std::string& where) {
  only_keys(block, {"type", "id", "name", "input", "cache_control", "caller"}, where, where);
  check_cache_control(block, where);
  if (const json* caller = field(block, "caller"); caller && *caller != json{{"type", "direct"}}) {
    throw bad_request("'" + where + ".caller' must be {\"type\": \"direct\"}: this server runs no server tools", where,
                      "unsupported_parameter");
  }
  const json* input = field(block, "input");
  if (!input || !input->is_object()) throw wrong_type(where + ".input", "an object");
  return {{"id", required_string(block, "id", where)},
          {"type", "function"},
          {"function", {{"name", required_string(block, "name", where)},
                        {"arguments", input->dump(-1, ' ', false, json::error_handler_t::replace)}}}};
}

// A user turn: text blocks joined into user messages, each tool_result its own tool message, in
// the order given.
void add_user(const json& content, const std::string& where, json& out) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  std::optional<std::string> text;  // consecutive text blocks
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string& type = block_type(content[i], at(where, i));
    if (type == "text") {
      if (!text) text.emplace();
      *text += text_of(content[i], at(where, i));
    } else if (type == "tool_result") {
      if (text) out.push_back({{"role", "user"}, {"content", *std::exchange(text, std::nullopt)}});
      out.push_back(tool_message(content[i], at(where, i)));
    } else {
      throw unsupported_block(type, at(where, i), "a user turn holds text and tool_result blocks");
    }
  }
  if (text) out.push_back({{"role", "user"}, {"content", std::move(*text)}});
}

// An assistant turn: its text joined, its tool_use blocks the message's tool_calls.
void add_assistant(const json& content, const std::string& where, json& out) {
  json message = {{"role", "assistant"}, {"content", content.is_string() ? content : json("")}};
  if (content.is_array()) {
    std::string text;
    for (size_t i = 0; i < content.size(); ++i) {
      const std::string& type = block_type(content[i], at(where, i));
      if (type == "text") {
        text += text_of(content[i], at(where, i));
      } else if (type == "tool_use") {
        message["tool_calls"].push_back(tool_call(content[i], at(where, i)));
      } else if (type == "thinking") {
        // Its signature vouches for nothing here: this server signs no thinking.
        only_keys(content[i], {"type", "thinking", "signature"}, at(where, i), at(where, i));
        message["reasoning_content"] = required_string(content[i], "thinking", at(where, i));
      } else {
        throw unsupported_block(type, at(where, i), "an assistant turn holds thinking, text and tool_use blocks");
      }
    }
    message["content"] = std::move(text);
  }
  out.push_back(std::move(message));
}

json chat_messages(const json& messages, const Serving& serving) {
  if (!messages.is_array() || messages.empty()) throw wrong_type("messages", "a non-empty array");
  // Every message adds at least one token: more than the context window holds can never fit.
  if (messages.size() > size_t(serving.max_model_len())) {
    throw bad_request("'messages' has more turns than the context window of " +
                          std::to_string(serving.max_model_len()) + " tokens can hold",
                      "messages", "context_length_exceeded");
  }
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = at("messages", i);
    if (!m.is_object()) throw wrong_type(where, "an object of {role, content}");
    only_keys(m, {"role", "content"}, where, "messages");
    const std::string& role = required_string(m, "role", where);
    const json* content = field(m, "content");
    if (!content) throw bad_request("'" + where + ".content' is required", "messages");
    if (!content->is_string() && !(content->is_array() && !content->empty())) {
      throw wrong_type(where + ".content", "a string or a non-empty array of content blocks");
    }
    if (role == "user") {
      add_user(*content, where + ".content", out);
    } else if (role == "assistant") {
      add_assistant(*content, where + ".content", out);
    } else {
      throw bad_request("'" + where + ".role' must be user or assistant (instructions go in 'system')", "messages");
    }
  }
  // The chat template always opens a new assistant turn after the conversation.
  if (messages.back().value("role", "") == "assistant") {
    throw bad_request("a final assistant message (prefill) is not supported: the answer always starts a new "
                      "assistant turn; end 'messages' with a user message",
                      "messages", "unsupported_parameter");
  }
  return out;
}

// Custom tools in the chat API's nesting: input_schema becomes the function's parameters.
json chat_tools(const json& tools) {
  if (!tools.is_array()) throw wrong_type("tools", "an array of tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string where = at("tools", i);
    if (!t.is_object()) throw wrong_type(where, "an object");
    if (const json* type = field(t, "type"); type && *type != "custom") {
      throw bad_request("'" + where + ".type' " + type->dump() +
                            " is not supported: only custom tools (run by the client) are, as no server tools run here",
                        "tools", "unsupported_parameter");
    }
    only_keys(t, {"type", "name", "description", "input_schema", "cache_control", "strict"}, where, "tools");
    check_cache_control(t, where);
    json fn = {{"name", required_string(t, "name", where)}};
    if (const json* d = field(t, "description")) {
      if (!d->is_string()) throw wrong_type(where + ".description", "a string");
      fn["description"] = *d;
    }
    const json* schema = field(t, "input_schema");
    if (!schema || !schema->is_object()) throw wrong_type(where + ".input_schema", "a JSON Schema object");
    fn["parameters"] = *schema;
    if (const json* strict = field(t, "strict")) fn["strict"] = *strict;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// {type: auto | any | tool | none, name, disable_parallel_tool_use} -> tool_choice and
// parallel_tool_calls.
void translate_tool_choice(const json& choice, json& chat) {
  const char* shape = "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"} (with \"name\" for tool)";
  if (!choice.is_object()) throw bad_request(shape, "tool_choice");
  const json type = choice.value("type", json());
  if (type == "tool") {
    only_keys(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice", "tool_choice");
    chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", required_string(choice, "name", "tool_choice")}}}};
  } else if (type == "auto" || type == "any") {
    only_keys(choice, {"type", "disable_parallel_tool_use"}, "tool_choice", "tool_choice");
    chat["tool_choice"] = type == "any" ? "required" : "auto";
  } else if (type == "none") {
    only_keys(choice, {"type"}, "tool_choice", "tool_choice");
    chat["tool_choice"] = "none";
  } else {
    throw bad_request(shape, "tool_choice");
  }
  if (const json* v = field(choice, "disable_parallel_tool_use")) {
    if (!v->is_boolean()) throw wrong_type("tool_choice.disable_parallel_tool_use", "a boolean");
    chat["parallel_tool_calls"] = !v->get<bool>();
  }
}

std::vector<std::string> stop_sequences(const json& body) {
  const json* v = field(body, "stop_sequences");
  if (!v) return {};
  if (!v->is_array()) throw wrong_type("stop_sequences", "an array of strings");
  std::vector<std::string> stops;
  for (const json& s : *v) {
    if (!s.is_string()) throw wrong_type("stop_sequences", "an array of strings");
    stops.push_back(s.get<std::string>());
  }
  return stops;
}

// A label for the caller's own bookkeeping, checked for its shape, then not used.
void check_metadata(const json& body) {
  const json* m = field(body, "metadata");
  if (!m) return;
  if (!m->is_object()) throw wrong_type("metadata", "an object");
  only_keys(*m, {"user_id"}, "metadata", "metadata");
  const json* user = field(*m, "user_id");
  if (user && (!user->is_string() || user->get_ref<const std::string&>().size() > 256)) {
    throw bad_request("'metadata.user_id' must be a string of at most 256 characters", "metadata");
  }
}

// Extended thinking on a reasoning model: its template's enable_thinking, and a budget for
// "enabled". The thinking comes back whole (there is no summarizer), in thinking blocks.
void translate_thinking(const json& body, const Serving& serving, json& chat) {
  const json* v = field(body, "thinking");
  if (!v) return;
  const std::string type = v->is_object() ? v->value("type", "") : "";
  if (type == "disabled") {
    only_keys(*v, {"type"}, "thinking", "thinking");
    chat["chat_template_kwargs"] = {{"enable_thinking", false}};
    return;
  }
  if (type != "enabled" && type != "adaptive") {
    throw bad_request("'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N}, {\"type\": \"adaptive\"} or "
                      "{\"type\": \"disabled\"}",
                      "thinking");
  }
  only_keys(*v, {"type", "budget_tokens", "display"}, "thinking", "thinking");
  if (const json* d = field(*v, "display"); d && *d != "summarized") {
    throw bad_request("'thinking.display' may only be \"summarized\" (the thinking comes back whole)", "thinking",
                      "unsupported_parameter");
  }
  if (!serving.reasoning_tags()) {
    throw bad_request("'thinking' needs a reasoning model: this one writes no thinking (see --reasoning-parser)",
                      "thinking", "unsupported_parameter");
  }
  chat["chat_template_kwargs"] = {{"enable_thinking", true}};
  if (type == "adaptive") return;
  const json* budget = field(*v, "budget_tokens");
  if (!budget || !budget->is_number_integer() || budget->get<int64_t>() < 0 || budget->get<int64_t>() > (1 << 30)) {
    throw bad_request("'thinking.budget_tokens' must be a non-negative integer", "thinking");
  }
  chat["reasoning_budget"] = *budget;
}

void refuse_unsupported(const json& body) {
  if (const json* v = field(body, "service_tier"); v && *v != "auto" && *v != "standard_only") {
    throw bad_request("'service_tier' must be \"auto\" or \"standard_only\" (there is one tier)", "service_tier");
  }
}

// Anthropic's range, narrower than OpenAI's [0, 2] the chat parser allows.
const json& temperature(const json& v) {
  if (!v.is_number()) throw wrong_type("temperature", "a number");
  const double t = v.get<double>();
  if (!(t >= 0 && t <= 1)) throw bad_request("'temperature' must be in [0, 1], got " + v.dump(), "temperature");
  return v;
}

// The chat body the request reads as; a field not among `fields` is refused.
json chat_body(const json& body, const std::set<std::string_view>& fields, const Serving& serving) {
  json chat = json::object();
  for (const auto& [key, value] : body.items()) {
    if (!fields.count(key)) {
      throw bad_request("Unrecognized request argument supplied: " + key, key, "unsupported_parameter");
    }
    if (kChatFields.count(key)) chat[key] = value;
  }
  refuse_unsupported(body);
  translate_thinking(body, serving, chat);
  check_cache_control(body, "");
  if (!field(body, "model")) throw bad_request("'model' is required", "model");
  if (const json* v = field(body, "temperature")) chat["temperature"] = temperature(*v);
  if (const json* v = field(body, "tools")) chat["tools"] = chat_tools(*v);
  if (const json* v = field(body, "tool_choice")) translate_tool_choice(*v, chat);
  const json* messages = field(body, "messages");
  if (!messages) throw bad_request("'messages' is required", "messages");
  chat["messages"] = json::array();
  if (const json* system = field(body, "system")) {
    chat["messages"].push_back({{"role", "system"}, {"content", joined_text(*system, "system")}});
  }
  for (json& m : chat_messages(*messages, serving)) chat["messages"].push_back(std::move(m));
  return chat;
}

// The chat parser names chat fields; the client wrote Anthropic's. Only the stop strings' errors
// can name one the client did not write (the others are checked here first).
GenerationRequest parse_as_chat(const json& chat, const Serving& serving, const std::function<bool()>& cancelled) {
  try {
    return parse_chat_request(chat, serving, cancelled);
  } catch (const ApiError& e) {
    if (e.param != "stop") throw;
    std::string message = e.what();
    for (const auto& [chat_name, name] : {std::pair{"'stop'", "'stop_sequences'"},
                                          {"'parallel_tool_calls' false", "'disable_parallel_tool_use' true"}}) {
      const size_t pos = message.find(chat_name);
      if (pos != std::string::npos) message.replace(pos, std::string_view(chat_name).size(), name);
    }
    throw ApiError(e.status, message, e.type, "stop_sequences", e.code);
  }
}

}  // namespace

MessagesRequest parse_messages_request(const json& body, const Serving& serving,
                                       const std::function<bool()>& cancelled) {
  json chat = chat_body(body, kCreateFields, serving);
  if (!field(body, "max_tokens")) throw bad_request("'max_tokens' is required", "max_tokens");
  check_metadata(body);
  MessagesRequest r;
  r.stop_sequences = stop_sequences(body);
  if (!r.stop_sequences.empty()) chat["stop"] = r.stop_sequences;
  r.generation = parse_as_chat(chat, serving, cancelled);
  return r;
}

int64_t count_message_tokens(const json& body, const Serving& serving, const std::function<bool()>& cancelled) {
  const json chat = chat_body(body, kCountFields, serving);
  return int64_t(parse_as_chat(chat, serving, cancelled).prompts[0].size());
}

}  // namespace flashserve
