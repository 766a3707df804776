// Each family is rendered exactly as its reference Jinja template renders plain text messages
// (ChatML as in SmolLM2/Qwen2.5, Llama-3 Instruct, Llama-2 chat, Gemma 3).
#include "model/chat_template.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

namespace flashserve {
namespace {

constexpr std::string_view kChatmlSystemOpen = "<|im_start|>system\n";
constexpr std::string_view kChatmlClose = "<|im_end|>";

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

// Jinja's `trim` and Python's str.strip().
std::string strip(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kSpace);
  return std::string(s.substr(begin, end - begin + 1));
}

// Reads the Jinja string literal whose opening quote is at source[pos]; leaves pos after it.
std::string read_literal(const std::string& source, size_t& pos) {
  const char quote = source[pos++];
  std::string out;
  while (pos < source.size() && source[pos] != quote) {
    char c = source[pos++];
    if (c == '\\' && pos < source.size()) {
      char e = source[pos++];
      out += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
    } else {
      out += c;
    }
  }
  ++pos;  // closing quote
  return out;
}

// String literals inside {{ }} and {% %} tags; literal text outside tags is output, not code, and
// may contain stray quotes.
std::vector<std::string> jinja_literals(const std::string& source) {
  std::vector<std::string> literals;
  size_t pos = 0;
  while ((pos = source.find('{', pos)) != std::string::npos) {
    if (pos + 1 >= source.size() || (source[pos + 1] != '{' && source[pos + 1] != '%')) {
      ++pos;
      continue;
    }
    const std::string_view close = source[pos + 1] == '{' ? "}}" : "%}";
    pos += 2;
    while (pos < source.size() && source.compare(pos, 2, close) != 0) {
      if (source[pos] == '\'' || source[pos] == '"') {
        literals.push_back(read_literal(source, pos));
      } else {
        ++pos;
      }
    }
  }
  return literals;
}

// ChatML templates that insert a system turn when the conversation has none spell it as one
// literal, "<|im_start|>system\n...<|im_end|>\n" (SmolLM2, Qwen2.5); its middle is the default.
std::string chatml_default_system(const std::string& source) {
  for (const std::string& lit : jinja_literals(source)) {
    if (!lit.starts_with(kChatmlSystemOpen)) continue;
    size_t end = lit.find(kChatmlClose, kChatmlSystemOpen.size());
    if (end == std::string::npos || end == kChatmlSystemOpen.size()) continue;
    return lit.substr(kChatmlSystemOpen.size(), end - kChatmlSystemOpen.size());
  }
  return {};
}

void require_role(const ChatMessage& m, std::initializer_list<std::string_view> allowed, const char* family) {
  if (std::find(allowed.begin(), allowed.end(), m.role) == allowed.end()) {
    throw std::invalid_argument(std::string(family) + " chat format has no role '" + m.role + "'");
  }
}

// Llama-2 and Gemma: an optional leading system message, then user/assistant turns in strict
// alternation starting with the user. Returns the system text (nullopt if none) and the turns.
std::pair<std::optional<std::string>, std::vector<ChatMessage>> split_alternating(
    const std::vector<ChatMessage>& messages, const char* family) {
  std::optional<std::string> system;
  auto first = messages.begin();
  if (first != messages.end() && first->role == "system") system = (first++)->content;
  std::vector<ChatMessage> turns(first, messages.end());
  for (size_t i = 0; i < turns.size(); ++i) {
    const char* expected = i % 2 == 0 ? "user" : "assistant";
    if (turns[i].role != expected) {
      throw std::invalid_argument(std::string(family) + " chat format needs user/assistant turns alternating, "
                                  "starting with user (after an optional system message); message " +
                                  std::to_string(i) + " is '" + turns[i].role + "'");
    }
  }
  return {system, turns};
}

std::string render_chatml(const std::vector<ChatMessage>& messages, const std::string& default_system, bool gen) {
  std::string out;
  if (!default_system.empty() && !messages.empty() && messages.front().role != "system") {
    out.append(kChatmlSystemOpen).append(default_system).append(kChatmlClose).append("\n");
  }
  for (const auto& m : messages) {
    require_role(m, {"system", "user", "assistant", "tool"}, "ChatML");
    out.append("<|im_start|>").append(m.role).append("\n").append(m.content).append(kChatmlClose).append("\n");
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, const std::string& bos, bool gen) {
  std::string out;
  if (!messages.empty()) out += bos;
  for (const auto& m : messages) {
    require_role(m, {"system", "user", "assistant", "tool"}, "Llama-3");
    out.append("<|start_header_id|>").append(m.role).append("<|end_header_id|>\n\n");
    out.append(strip(m.content)).append("<|eot_id|>");
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// The prompt always ends ready for the assistant, so there is no separate generation prompt.
std::string render_llama2(const std::vector<ChatMessage>& messages, const std::string& bos, const std::string& eos) {
  auto [system, turns] = split_alternating(messages, "Llama-2");
  std::string out;
  for (size_t i = 0; i < turns.size(); ++i) {
    std::string content = turns[i].content;
    if (i == 0 && system) content = "<<SYS>>\n" + *system + "\n<</SYS>>\n\n" + content;
    if (turns[i].role == "user") {
      out.append(bos).append("[INST] ").append(strip(content)).append(" [/INST]");
    } else {
      out.append(" ").append(strip(content)).append(" ").append(eos);
    }
  }
  return out;
}

// Gemma has no system role: the system text opens the first user turn.
std::string render_gemma(const std::vector<ChatMessage>& messages, const std::string& bos, bool gen) {
  auto [system, turns] = split_alternating(messages, "Gemma");
  std::string out = bos;
  for (size_t i = 0; i < turns.size(); ++i) {
    out.append("<start_of_turn>").append(turns[i].role == "assistant" ? "model" : "user").append("\n");
    if (i == 0 && system) out.append(*system).append("\n\n");
    out.append(strip(turns[i].content)).append("<end_of_turn>\n");
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

}  // namespace

ChatTemplate ChatTemplate::from_source(const std::string& jinja_source, const std::string& bos_text,
                                       const std::string& eos_text) {
  ChatTemplate t;
  t.bos_text_ = bos_text;
  t.eos_text_ = eos_text;
  if (contains(jinja_source, "<|start_header_id|>")) {
    t.format_ = ChatFormat::Llama3;
  } else if (contains(jinja_source, "<|im_start|>")) {
    t.format_ = ChatFormat::ChatML;
    t.default_system_ = chatml_default_system(jinja_source);
  } else if (contains(jinja_source, "<start_of_turn>")) {
    t.format_ = ChatFormat::Gemma;
  } else if (contains(jinja_source, "[INST]") && contains(jinja_source, "<<SYS>>")) {
    t.format_ = ChatFormat::Llama2;
  } else {
    throw UnsupportedTemplate(
        jinja_source.empty()
            ? "the model has no chat template"
            : "unsupported chat template: recognised families are ChatML (<|im_start|>), Llama-3 "
              "(<|start_header_id|>), Llama-2 ([INST] with <<SYS>>) and Gemma (<start_of_turn>)");
  }
  return t;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  switch (format_) {
    case ChatFormat::ChatML: return render_chatml(messages, default_system_, add_generation_prompt);
    case ChatFormat::Llama3: return render_llama3(messages, bos_text_, add_generation_prompt);
    case ChatFormat::Llama2: return render_llama2(messages, bos_text_, eos_text_);
    case ChatFormat::Gemma: return render_gemma(messages, bos_text_, add_generation_prompt);
  }
  return {};
}

}  // namespace flashserve
