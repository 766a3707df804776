// ChatTemplate: templates rendered by our Jinja engine against what jinja2 renders with Hugging
// Face's settings (trim_blocks, lstrip_blocks): the expected strings below were produced that way,
// and MatchesJinja2 renders real templates (scripts/fetch_templates.sh) through both and compares.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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
  EXPECT_EQ(t.format(), ChatFormat::Template);
  EXPECT_EQ(t.apply(kUserOnly, true), "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n"
            "Hello. <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  EXPECT_EQ(t.apply({}, true), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, Qwen25DefaultSystem) {
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
  const std::string system =
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";
  EXPECT_EQ(t.apply(kUserOnly, true), system + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            system + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n Hi\n<|im_end|>\n<|im_start|>assistant\n"
            "Hello. <|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

const std::string kLlama3UserOnly =
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n";
const std::string kLlama3WithSystem =
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
    "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>"
    "\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n";
const std::string kLlama3EndsWithAssistant =
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>";

TEST(ChatTemplate, Llama3) {
  auto t = ChatTemplate::from_source(kLlama3, "<|begin_of_text|>", "<|eot_id|>");
  EXPECT_EQ(t.apply(kUserOnly, true), kLlama3UserOnly);
  EXPECT_EQ(t.apply(kWithSystem, true), kLlama3WithSystem);
  EXPECT_EQ(t.apply(kEndsWithAssistant, false), kLlama3EndsWithAssistant);
}

TEST(ChatTemplate, Llama2) {
  auto t = ChatTemplate::from_source(kLlama2, "<s>", "</s>");
  EXPECT_EQ(t.apply(kUserOnly, true), "<s>[INST] Hello! [/INST]");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<s>[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\n Hi [/INST] Hello. </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false), "<s>[INST] Hi [/INST] Hello. </s>");
  // raise_exception() in the template: a ChatTemplateError (an invalid_argument) with its message.
  try {
    t.apply({{"assistant", "first"}}, true);
    FAIL() << "no error";
  } catch (const ChatTemplateError& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
  EXPECT_THROW(t.apply({{"user", "a"}, {"user", "b"}}, true), std::invalid_argument);
}

TEST(ChatTemplate, Gemma) {
  auto t = ChatTemplate::from_source(kGemma3, "<bos>", "<eos>");
  EXPECT_EQ(t.apply(kUserOnly, true), "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(kWithSystem, true),
            "<bos><start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(t.apply(kEndsWithAssistant, false),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n");
  // The template itself only checks that user and assistant alternate (a late system message at an
  // assistant position passes, as in jinja2).
  EXPECT_THROW(t.apply({{"user", "a"}, {"user", "b"}}, true), std::invalid_argument);
}

// The built-in formats (for files without a template) render what the official templates do.
TEST(ChatTemplate, BuiltinsMatchTheirFamilies) {
  struct Case {
    ChatFormat format;
    const char* official;
    const char* bos;
    const char* eos;
  };
  for (const Case& c : {Case{ChatFormat::ChatML, kChatml, "", ""}, Case{ChatFormat::Llama3, kLlama3, "<|begin_of_text|>", "<|eot_id|>"},
                        Case{ChatFormat::Llama2, kLlama2, "<s>", "</s>"}, Case{ChatFormat::Gemma, kGemma3, "<bos>", "<eos>"}}) {
    auto builtin = ChatTemplate::builtin(c.format, c.bos, c.eos);
    auto official = ChatTemplate::from_source(c.official, c.bos, c.eos);
    EXPECT_EQ(builtin.format(), c.format);
    for (const Messages& m : {kUserOnly, kWithSystem, kEndsWithAssistant}) {
      for (bool gen : {true, false}) EXPECT_EQ(builtin.apply(m, gen), official.apply(m, gen)) << int(c.format);
    }
  }
  EXPECT_THROW(ChatTemplate::builtin(ChatFormat::Llama2, "<s>", "</s>").apply({{"user", "a"}, {"user", "b"}}, true),
               ChatTemplateError);
  EXPECT_THROW(ChatTemplate::builtin(ChatFormat::Template, "", ""), std::invalid_argument);
}

TEST(ChatTemplate, BuiltinsRefuseUnknownRoles) {
  EXPECT_THROW(ChatTemplate::builtin(ChatFormat::ChatML, "", "").apply({{"narrator", "x"}}, true), ChatTemplateError);
  EXPECT_THROW(ChatTemplate::builtin(ChatFormat::Llama3, "", "").apply({{"", "x"}}, true), ChatTemplateError);
}

TEST(ChatTemplate, GuessBuiltin) {
  auto vocab = [](std::initializer_list<std::string> tokens) {
    return [v = std::vector<std::string>(tokens)](const std::string& t) { return std::find(v.begin(), v.end(), t) != v.end(); };
  };
  EXPECT_EQ(ChatTemplate::guess_builtin(vocab({"<|im_start|>", "<|im_end|>"})), ChatFormat::ChatML);
  EXPECT_EQ(ChatTemplate::guess_builtin(vocab({"<|start_header_id|>", "<|im_start|>"})), ChatFormat::Llama3);
  EXPECT_EQ(ChatTemplate::guess_builtin(vocab({"<start_of_turn>"})), ChatFormat::Gemma);
  EXPECT_EQ(ChatTemplate::guess_builtin(vocab({"[INST]"})), ChatFormat::Llama2);
  EXPECT_EQ(ChatTemplate::guess_builtin(vocab({"<s>"})), std::nullopt);
}

TEST(ChatTemplate, UnsupportedTemplate) {
  EXPECT_THROW(ChatTemplate::from_source("", "", ""), UnsupportedTemplate);
  try {
    ChatTemplate::from_source("{% for m in messages %}\n  {{ m.content }\n{% endfor %}", "", "");
    FAIL() << "parsed";
  } catch (const UnsupportedTemplate& e) {
    EXPECT_NE(std::string(e.what()).find("line 2, column"), std::string::npos) << e.what();
  }
  // Templates of any family now render: Mistral's [INST] without <<SYS>>, Phi-3's <|user|>.
  auto mistral = ChatTemplate::from_source("{{ bos_token }}{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}", "<s>", "</s>");
  EXPECT_EQ(mistral.apply(kUserOnly, true), "<s>[INST] Hello! [/INST]");
}

TEST(ChatTemplate, FromFile) {
  const std::string path = testing::TempDir() + "/flashserve_chat_template.jinja";
  std::ofstream(path) << "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}\n";
  EXPECT_EQ(ChatTemplate::from_file(path, "", "").apply(kUserOnly, true), "<user>Hello!");
  std::ofstream(path) << "{% if %}";
  EXPECT_THROW(ChatTemplate::from_file(path, "", ""), UnsupportedTemplate);
  std::filesystem::remove(path);
  EXPECT_THROW(ChatTemplate::from_file(path, "", ""), UnsupportedTemplate);
}

// Messages, tools and extra variables as JSON reach the template as they are.
TEST(ChatTemplate, RenderJson) {
  auto t = ChatTemplate::from_source(
      "{% for m in messages %}{{ m.role }}:{{ m.content }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %};"
      "{% endfor %}{% if tools is not none %}{{ tools | tojson }}{% endif %}{{ enable_thinking | default('unset') }}",
      "", "");
  const auto messages = nlohmann::ordered_json::parse(
      R"([{"role": "developer", "content": "be brief"},
          {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"z": 1, "a": "é"}}}]}])");
  EXPECT_EQ(t.render(messages, true), "developer:be brief;assistant:None[{\"type\": \"function\", \"function\": "
                                      "{\"name\": \"f\", \"arguments\": {\"z\": 1, \"a\": \"é\"}}}];unset");
  const auto tools = nlohmann::ordered_json::parse(R"([{"name": "g"}])");
  EXPECT_EQ(t.render(nlohmann::ordered_json::array(), false, tools, {{"enable_thinking", false}}), "[{\"name\": \"g\"}]False");
  // A limit is an error of the render, not a crash.
  auto big = ChatTemplate::from_source("{% for i in range(10) %}{{ messages[0].content }}{% endfor %}", "", "");
  jinja::Limits limits;
  limits.max_output_bytes = 1000;
  big.set_limits(limits);
  EXPECT_THROW(big.apply({{"user", std::string(200, 'x')}}, true), ChatTemplateError);
}

// ---- Real templates, rendered by jinja2 and by us.

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_difference(const std::string& ours, const std::string& theirs) {
  size_t i = 0;
  while (i < ours.size() && i < theirs.size() && ours[i] == theirs[i]) ++i;
  auto around = [&](const std::string& s) { return "\"" + s.substr(i < 40 ? 0 : i - 40, 80) + "\""; };
  return "first difference at byte " + std::to_string(i) + ":\n  ours:   " + around(ours) + "\n  jinja2: " + around(theirs);
}

TEST(ChatTemplate, MatchesJinja2) {
  const std::string python = FLASHSERVE_VENV_PYTHON;
  const std::string templates = FLASHSERVE_TEMPLATES_DIR;
  if (!std::filesystem::exists(python)) GTEST_SKIP() << "no " << python << " with jinja2 (run scripts/setup.sh)";
  std::vector<std::string> files;
  if (std::filesystem::is_directory(templates)) {
    for (const auto& e : std::filesystem::directory_iterator(templates)) {
      if (e.path().extension() == ".jinja") files.push_back(e.path().string());
    }
  }
  if (files.empty()) GTEST_SKIP() << "no real templates in " << templates << " (run scripts/fetch_templates.sh)";
  // The templates above go through the same comparison.
  const std::string dir = testing::TempDir() + "/flashserve_inline_templates";
  std::filesystem::create_directories(dir);
  for (const auto& [name, source] : std::map<std::string, const char*>{
           {"gemma-3", kGemma3}, {"qwen2.5-abridged", kQwen25}, {"llama-3-plain", kLlama3}, {"llama-2", kLlama2}, {"chatml", kChatml}}) {
    std::ofstream(dir + "/" + name + ".jinja", std::ios::binary) << source;
    files.push_back(dir + "/" + name + ".jinja");
  }
  std::sort(files.begin(), files.end());
  const std::string out = dir + "/reference.json";
  std::string command = "'" + python + "' '" FLASHSERVE_SOURCE_DIR "/tests/model/render_chat_reference.py'";
  for (const std::string& f : files) command += " '" + f + "'";
  ASSERT_EQ(std::system((command + " > '" + out + "'").c_str()), 0) << command;
  const auto cases = nlohmann::ordered_json::parse(read_file(out));
  ASSERT_FALSE(cases.empty());

  std::map<std::string, std::pair<int, int>> summary;  // template -> (identical, raised in both)
  for (const auto& c : cases) {
    const std::string name = c["template"], label = name + "/" + std::string(c["case"]);
    SCOPED_TRACE(label);
    const ChatTemplate t = ChatTemplate::from_source(read_file(c["path"]), c["bos_token"], c["eos_token"]);
    std::string ours, error;
    try {
      ours = t.render(c["messages"], c["add_generation_prompt"], c["tools"], c["extra"]);
    } catch (const ChatTemplateError& e) {
      error = e.what();
    }
    if (c.contains("error")) {
      EXPECT_FALSE(error.empty()) << "jinja2 raised (" << std::string(c["error"]) << ") but we rendered:\n" << ours;
      if (!error.empty()) ++summary[name].second;
      continue;
    }
    const std::string expected = c["output"];
    EXPECT_TRUE(error.empty()) << "we raised: " << error;
    if (!error.empty()) continue;
    EXPECT_EQ(ours, expected) << first_difference(ours, expected);
    if (ours == expected) ++summary[name].first;
  }
  for (const auto& [name, counts] : summary) {
    std::printf("[ jinja2   ] %-18s %2d identical, %2d raise in both\n", name.c_str(), counts.first, counts.second);
  }
}

}  // namespace
}  // namespace flashserve
