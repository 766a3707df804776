#include "model/chat_template.h"

#include <fstream>
#include <sstream>

#include "model/jinja/template.h"

namespace flashserve {
namespace {

// The built-in formats, written as templates of their own: each renders plain messages as the
// family's official template does, and refuses (raise_exception) what the family cannot express.
constexpr const char* kBuiltinChatML = R"({%- for m in messages -%}
{%- if m.role not in ['system', 'user', 'assistant', 'tool'] -%}
{{ raise_exception("ChatML chat format has no role '" ~ m.role ~ "'") }}
{%- endif -%}
{{ '<|im_start|>' ~ m.role ~ '\n' ~ m.content ~ '<|im_end|>\n' }}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif -%})";

constexpr const char* kBuiltinLlama3 = R"({%- for m in messages -%}
{%- if m.role not in ['system', 'user', 'assistant', 'tool', 'ipython'] -%}
{{ raise_exception("Llama-3 chat format has no role '" ~ m.role ~ "'") }}
{%- endif -%}
{%- if loop.first %}{{ bos_token }}{% endif -%}
{{ '<|start_header_id|>' ~ m.role ~ '<|end_header_id|>\n\n' ~ (m.content | trim) ~ '<|eot_id|>' }}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif -%})";

// Llama-2 and Gemma: an optional system message, then user/assistant turns alternating.
constexpr const char* kAlternation = R"({%- set system = messages[0].content if messages and messages[0].role == 'system' else none -%}
{%- set turns = messages[1:] if system is not none else messages -%}
{%- for m in turns -%}
{%- if m.role != (['user', 'assistant'][loop.index0 % 2]) -%}
{{ raise_exception(FAMILY ~ " chat format needs user/assistant turns alternating, starting with user (after an optional system message); message " ~ loop.index0 ~ " is '" ~ m.role ~ "'") }}
{%- endif -%}
{%- endfor -%})";

constexpr const char* kBuiltinLlama2 = R"({%- for m in turns -%}
{%- set content = ('<<SYS>>\n' ~ system ~ '\n<</SYS>>\n\n' ~ m.content) if loop.first and system is not none else m.content -%}
{%- if m.role == 'user' -%}
{{ bos_token ~ '[INST] ' ~ (content | trim) ~ ' [/INST]' }}
{%- else -%}
{{ ' ' ~ (content | trim) ~ ' ' ~ eos_token }}
{%- endif -%}
{%- endfor -%})";

constexpr const char* kBuiltinGemma = R"({{ bos_token }}
{%- for m in turns -%}
{{ '<start_of_turn>' ~ ('model' if m.role == 'assistant' else 'user') ~ '\n' }}
{%- if loop.first and system is not none %}{{ system ~ '\n\n' }}{% endif -%}
{{ (m.content | trim) ~ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif -%})";

std::string builtin_source(ChatFormat format) {
  switch (format) {
    case ChatFormat::ChatML: return kBuiltinChatML;
    case ChatFormat::Llama3: return kBuiltinLlama3;
    case ChatFormat::Llama2: return "{%- set FAMILY = 'Llama-2' -%}" + std::string(kAlternation) + kBuiltinLlama2;
    case ChatFormat::Gemma: return "{%- set FAMILY = 'Gemma' -%}" + std::string(kAlternation) + kBuiltinGemma;
    case ChatFormat::Template: break;
  }
  throw std::invalid_argument("ChatTemplate::builtin needs a built-in format");
}

}  // namespace

ChatTemplate ChatTemplate::from_source(const std::string& jinja_source, const std::string& bos_text,
                                       const std::string& eos_text) {
  if (jinja_source.empty()) throw UnsupportedTemplate("the model has no chat template");
  ChatTemplate t;
  try {
    t.template_ = std::make_shared<const jinja::Template>(jinja::Template::parse(jinja_source));
  } catch (const jinja::TemplateError& e) {
    throw UnsupportedTemplate(std::string("the chat template does not parse: ") + e.what());
  }
  t.format_ = ChatFormat::Template;
  t.source_ = jinja_source;
  t.bos_text_ = bos_text;
  t.eos_text_ = eos_text;
  return t;
}

ChatTemplate ChatTemplate::from_file(const std::string& path, const std::string& bos_text, const std::string& eos_text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UnsupportedTemplate("cannot read the chat template file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw UnsupportedTemplate("cannot read the chat template file '" + path + "'");
  try {
    return from_source(text.str(), bos_text, eos_text);
  } catch (const UnsupportedTemplate& e) {
    throw UnsupportedTemplate(path + ": " + e.what());
  }
}

ChatTemplate ChatTemplate::builtin(ChatFormat format, const std::string& bos_text, const std::string& eos_text) {
  ChatTemplate t = from_source(builtin_source(format), bos_text, eos_text);
  t.format_ = format;
  return t;
}

std::optional<ChatFormat> ChatTemplate::guess_builtin(const std::function<bool(const std::string&)>& is_token) {
  if (is_token("<|start_header_id|>")) return ChatFormat::Llama3;
  if (is_token("<|im_start|>")) return ChatFormat::ChatML;
  if (is_token("<start_of_turn>")) return ChatFormat::Gemma;
  if (is_token("[INST]")) return ChatFormat::Llama2;
  return std::nullopt;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  return render(list, add_generation_prompt);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& tools, const nlohmann::ordered_json& extra) const {
  try {
    jinja::Budget budget(limits_);
    // What transformers passes: messages, tools and documents (None when absent),
    // add_generation_prompt, the special tokens, then the caller's extra variables.
    std::vector<std::pair<std::string, jinja::Value>> vars = {
        {"messages", jinja::from_json(messages, budget)},
        {"tools", jinja::from_json(tools, budget)},
        {"documents", jinja::Value::none()},
        {"add_generation_prompt", jinja::Value::boolean(add_generation_prompt)},
        {"bos_token", jinja::Value::string(bos_text_)},
        {"eos_token", jinja::Value::string(eos_text_)},
    };
    if (extra.is_object()) {
      for (auto it = extra.begin(); it != extra.end(); ++it) vars.emplace_back(it.key(), jinja::from_json(it.value(), budget));
    }
    return template_->render(vars, limits_);
  } catch (const jinja::TemplateError& e) {
    if (e.kind() == jinja::ErrorKind::Raised) throw ChatTemplateError(e.message());
    throw ChatTemplateError(std::string("chat template: ") + e.what());
  }
}

}  // namespace flashserve
