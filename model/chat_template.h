// Chat formatting: a model's own `tokenizer.chat_template` (or a --chat-template file) rendered by
// our Jinja engine (model/jinja/template.h) exactly as Hugging Face transformers renders it, with
// `messages`, `add_generation_prompt`, `tools`, `bos_token`, `eos_token` and any extra variables
// (e.g. `enable_thinking`). Four built-in formats remain for model files that ship no template.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/jinja/value.h"

namespace flashserve {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ... (the template decides what it accepts)
  std::string content;
};

// The model has no template we can use (none, or one that does not parse).
class UnsupportedTemplate : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Rendering failed: the template raised (e.g. roles that do not alternate), hit an error or a
// limit. Usually the conversation's fault, so callers answer it as a bad request.
class ChatTemplateError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Template: the Jinja source given; the others are the built-in formats.
enum class ChatFormat { Template, ChatML, Llama3, Llama2, Gemma };

class ChatTemplate {
 public:
  // The model's template. Throws UnsupportedTemplate when `jinja_source` is empty or does not
  // parse (the message gives line and column). bos_text/eos_text become bos_token/eos_token.
  static ChatTemplate from_source(const std::string& jinja_source, const std::string& bos_text,
                                  const std::string& eos_text);
  // --chat-template FILE: the file's text as the template; UnsupportedTemplate if unreadable.
  static ChatTemplate from_file(const std::string& path, const std::string& bos_text, const std::string& eos_text);
  // A built-in format (format != Template), for model files without a template.
  static ChatTemplate builtin(ChatFormat format, const std::string& bos_text, const std::string& eos_text);
  // The built-in format whose marker tokens a vocabulary has (`is_token(text)`): ChatML
  // (<|im_start|>), Llama-3 (<|start_header_id|>), Gemma (<start_of_turn>), Llama-2 ([INST]).
  static std::optional<ChatFormat> guess_builtin(const std::function<bool(const std::string&)>& is_token);

  ChatFormat format() const { return format_; }
  const std::string& source() const { return source_; }

  // Plain text messages. Throws ChatTemplateError.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  // Messages as JSON objects, passed through as they are (role, content, tool_calls, tool_call_id,
  // name, reasoning_content, ...); `tools` a JSON array of tool schemas, or null for none; `extra`
  // an object of more variables (enable_thinking, date_string, ...), which override the others.
  // Use ordered_json to keep key order: tojson prints keys in the order they arrive, as Python does.
  // Throws ChatTemplateError.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& tools = nullptr,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  const jinja::Limits& limits() const { return limits_; }
  void set_limits(const jinja::Limits& limits) { limits_ = limits; }

 private:
  ChatFormat format_ = ChatFormat::Template;
  std::string source_;
  std::shared_ptr<const jinja::Template> template_;
  std::string bos_text_, eos_text_;
  jinja::Limits limits_;
};

}  // namespace flashserve
