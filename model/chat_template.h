// Chat formatting from a model's `tokenizer.chat_template`. We do not run Jinja: we recognise the
// template families in use and render them natively, and refuse anything else with a clear error.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

namespace flashserve {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant"
  std::string content;
};

class UnsupportedTemplate : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ChatFormat { ChatML, Llama3, Llama2, Gemma };

class ChatTemplate {
 public:
  // Recognises the family of `jinja_source`; throws UnsupportedTemplate if it cannot.
  // bos_text/eos_text are the BOS/EOS token strings the template may reference.
  static ChatTemplate from_source(const std::string& jinja_source, const std::string& bos_text,
                                  const std::string& eos_text);
  ChatFormat format() const { return format_; }
  // Throws std::invalid_argument for messages the family cannot express (e.g. unknown role).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

 private:
  ChatFormat format_ = ChatFormat::ChatML;
  std::string bos_text_, eos_text_;
  std::string default_system_;  // a system prompt the template inserts when none is given
};

}  // namespace flashserve
