// Chat formats against what the official Jinja templates render (expected strings produced with
// jinja2 using Hugging Face's settings: trim_blocks and lstrip_blocks).
#include <gtest/gtest.h>

#include "model/chat_template.h"
#include "model/gguf.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using Messages = std::vector<ChatMessage>;

const Messages kUserOnly = {{"user", "Hello!"}};
// Untrimmed content shows which families strip it.
const Messages kWithSystem = {{"system", "You are terse."}, {"user", " Hi\n"}, {"assistant", "Hello. "}, {"user", "Bye"}};
const Messages kEndsWithAssistant = {{"user", "Hi"}, {"assistant", "Hello."}};

constexpr const char* kChatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
    "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2.5's template, abridged to the parts plain messages reach; its default system literal is
// written with "\n" escapes (SmolLM2's has real newlines).
constexpr const char* kQwen25 = R"({%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
)";

constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

constexpr const char* kLlama2 =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif "
    "%}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
    "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if "
    "message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] "
    "== 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

// Gemma 3's template.
constexpr const char* kGemma3 = R"({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
)";

TEST(ChatTemplate, ChatML) {
  auto t = ChatTemplate::from_source(kChatml, "", "");
  EXPECT_EQ(t.format(), ChatFormat::ChatML);
  EXPECT_EQ(t.apply(kUserOnly, true), "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n"
            "Hello. <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  EXPECT_EQ(t.apply({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, ChatMLDefaultSystemFromEscapedLiteral) {
  auto t = ChatTemplate::from_source(kQwen25, "", "<|im_end|>");
  const std::string system = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n";
  EXPECT_EQ(t.apply(kUserOnly, true), system + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  // A system message of its own replaces the default.
  EXPECT_EQ(t.apply({{"system", "S"}, {"user", "U"}}, false), "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n");
}

TEST(ChatTemplate, SmolLM2RealTemplate) {
  auto f = GgufFile::open(test::real_model_path());
  auto t = ChatTemplate::from_source(f->get_string("tokenizer.chat_template"), "<|im_start|>", "<|im_end|>");
  EXPECT_EQ(t.format(), ChatFormat::ChatML);
  const std::string system =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  EXPECT_EQ(t.apply(kUserOnly, true), system + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n"
            "Hello. <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Llama3) {
  auto t = ChatTemplate::from_source(kLlama3, "<|begin_of_text|>", "<|eot_id|>");
  EXPECT_EQ(t.format(), ChatFormat::Llama3);
  EXPECT_EQ(t.apply(kUserOnly, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
            "\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>");
}

TEST(ChatTemplate, Llama2) {
  auto t = ChatTemplate::from_source(kLlama2, "<s>", "</s>");
  EXPECT_EQ(t.format(), ChatFormat::Llama2);
  EXPECT_EQ(t.apply(kUserOnly, true), "<s>[INST] Hello! [/INST]");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\n Hi [/INST] Hello. </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false), "<s>[INST] Hi [/INST] Hello. </s>");
  EXPECT_THROW(t.apply({{"assistant", "first"}}, true), std::invalid_argument);
  EXPECT_THROW(t.apply({{"user", "a"}, {"user", "b"}}, true), std::invalid_argument);
}

TEST(ChatTemplate, Gemma) {
  auto t = ChatTemplate::from_source(kGemma3, "<bos>", "<eos>");
  EXPECT_EQ(t.format(), ChatFormat::Gemma);
  EXPECT_EQ(t.apply(kUserOnly, true), "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n");
  EXPECT_THROW(t.apply({{"user", "a"}, {"system", "late"}}, true), std::invalid_argument);
}

TEST(ChatTemplate, UnknownRoleRejected) {
  EXPECT_THROW(ChatTemplate::from_source(kChatml, "", "").apply({{"narrator", "x"}}, true), std::invalid_argument);
  EXPECT_THROW(ChatTemplate::from_source(kLlama3, "", "").apply({{"", "x"}}, true), std::invalid_argument);
}

TEST(ChatTemplate, UnsupportedTemplate) {
  // Mistral: [INST] without <<SYS>>. Phi-3: <|user|>.
  for (const char* source : {"{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}",
                             "{% for m in messages %}<|user|>\n{{ m['content'] }}<|end|>\n{% endfor %}"}) {
    try {
      ChatTemplate::from_source(source, "<s>", "</s>");
      FAIL() << "accepted " << source;
    } catch (const UnsupportedTemplate& e) {
      EXPECT_NE(std::string(e.what()).find("ChatML"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(ChatTemplate::from_source("", "", ""), UnsupportedTemplate);
}

}  // namespace
}  // namespace flashserve
