// Reasoning models: the splitter that takes <think>...</think> off the answer (whole and streamed
// in pieces), and over HTTP on the tiny random model with a DeepSeek-R1-style template (its prompt
// ends inside the reasoning): reasoning_content on chat (streamed and not), the Responses API's
// reasoning item, the reasoning budget forcing the close tag, chat_template_kwargs reaching the
// template; and the real Qwen3 template's enable_thinking.
#include <gtest/gtest.h>

#include <fstream>

#include "server/messages_writer.h"
#include "server/reasoning_splitter.h"
#include "tests/server/http_harness.h"
#include "tests/util/tiny_model.h"

namespace flashserve::test {
namespace {

SplitOutput whole(const std::string& text, bool starts_inside = false) {
  return ReasoningSplitter({ReasoningTags{}, starts_inside}).feed(text, true);
}

// Fed one byte at a time: the same split as whole().
SplitOutput bytewise(const std::string& text, bool starts_inside = false) {
  ReasoningSplitter s({ReasoningTags{}, starts_inside});
  SplitOutput out;
  for (size_t i = 0; i < text.size(); ++i) {
    SplitOutput piece = s.feed(text.substr(i, 1), i + 1 == text.size());
    out.reasoning += piece.reasoning;
    out.content += piece.content;
  }
  return out;
}

void expect_split(const std::string& text, bool starts_inside, const std::string& reasoning, const std::string& content) {
  for (const SplitOutput& s : {whole(text, starts_inside), bytewise(text, starts_inside)}) {
    EXPECT_EQ(s.reasoning, reasoning) << text;
    EXPECT_EQ(s.content, content) << text;
  }
}

TEST(ReasoningSplitter, SplitsTheTagsOffWholeOrInPieces) {
  expect_split("<think>\nLet me see.\n</think>\n\nParis.", false, "Let me see.", "Paris.");
  expect_split("  <think>a < b, and </thin is not a tag</think>Yes", false, "a < b, and </thin is not a tag", "Yes");
  expect_split("Paris, no thinking.", false, "", "Paris, no thinking.");
  expect_split("<thinking>is not the tag", false, "", "<thinking>is not the tag");
  expect_split("Hmm.\n</think>\n\nParis.", true, "Hmm.", "Paris.");     // the prompt opened it
  expect_split("<think>cut off by max_tokens  \n", false, "cut off by max_tokens", "");
  expect_split("  still  thinking", true, "still  thinking", "");
  expect_split("<think></think>Direct.", false, "", "Direct.");
  expect_split("", false, "", "");
  expect_split("<thi", false, "", "<thi");  // ended before it could be the tag
}

TEST(ReasoningSplitter, HoldsBackOnlyWhatCouldStillBeATag) {
  ReasoningSplitter s({ReasoningTags{}, true});
  EXPECT_EQ(s.feed("one two", false).reasoning, "one two");
  EXPECT_EQ(s.feed(" three </th", false).reasoning, " three");
  const SplitOutput end = s.feed("ink>\nfour", false);
  EXPECT_EQ(end.reasoning, "");
  EXPECT_EQ(end.content, "four");
}

TEST(ReasoningSplitter, MessagesGetAThinkingBlockBeforeTheText) {
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  r.prompts = {{1, 2, 3}};
  r.stream = true;
  r.reasoning = ReasoningMode{ReasoningTags{}, false};
  MessagesWriter w(r, {}, "m");
  RequestOutput first, last;
  first.text = "<think>\nParis is in Fr";
  first.num_output_tokens = 1;
  last.text = "ance.\n</think>\n\nParis.";
  last.num_output_tokens = 2;
  last.finish = FinishReason::Stop;
  std::string body = w.add({{0, first}});
  body += w.add({{0, last}});
  body += w.finish();
  std::string thinking;
  json final_blocks;
  for (const auto& [name, data] : sse_named_events(body)) {
    if (name == "content_block_delta" && data["delta"]["type"] == "thinking_delta") thinking += data["delta"]["thinking"];
    if (name == "content_block_start") final_blocks.push_back(data["content_block"]["type"]);
  }
  EXPECT_EQ(thinking, "Paris is in France.");
  EXPECT_EQ(final_blocks, json::array({"thinking", "text"}));

  r.stream = false;
  MessagesWriter whole(r, {}, "m");
  whole.add({{0, last}});
  const json message = json::parse(whole.finish());
  ASSERT_EQ(message["content"].size(), 1u) << message;  // no open tag: all answer
  EXPECT_EQ(message["content"][0]["type"], "text");
}

// DeepSeek-R1's way: the generation prompt opens the reasoning; enable_thinking false closes it at once.
constexpr char kThinkTemplate[] =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% else %}<think>\n{% endif %}"
    "{% endif %}";

class ReasoningHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    template_path_ = new std::string(temp_model_path("think") + ".jinja");
    std::ofstream(*template_path_) << kThinkTemplate;
    EngineOptions engine = test_engine_options(4 << 20);
    engine.chat_template_file = *template_path_;
    h_ = new HttpHarness(tiny_model(), engine);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
    delete template_path_;
  }
  // Printable ASCII only: a random model's other bytes are mostly broken UTF-8 (no text at all) and
  // its control tokens render as nothing.
  static json printable() {
    json bias = json::object();
    for (int id = 0; id < kTinyVocab; ++id) {
      if (id < 32 || (id > 126 && id < 256) || id >= 258) bias[std::to_string(id)] = -100;
    }
    return bias;
  }
  static json chat(int max_tokens, json extra = json::object()) {
    json body = {{"messages", {{{"role", "user"}, {"content", "Why?"}}}},
                 {"max_tokens", max_tokens},
                 {"ignore_eos", true},
                 {"logit_bias", printable()},
                 {"temperature", 0.9},
                 {"seed", 5}};
    body.update(extra);
    return body;
  }
  static HttpHarness* h_;
  static std::string* template_path_;
};
HttpHarness* ReasoningHttp::h_ = nullptr;
std::string* ReasoningHttp::template_path_ = nullptr;

TEST_F(ReasoningHttp, AnOpenReasoningIsReasoningContentUntilItCloses) {
  const Reply r = post(*h_, "/v1/chat/completions", chat(24));
  ASSERT_EQ(r.status, 200) << r.text;
  const json& m = r.body["choices"][0]["message"];
  EXPECT_TRUE(m["reasoning_content"].is_string()) << m;  // the random model never writes </think>
  EXPECT_EQ(m["content"], "") << m;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 24);
}

TEST_F(ReasoningHttp, TheBudgetForcesTheCloseTagAndTheAnswerFollows) {
  const Reply r = post(*h_, "/v1/chat/completions", chat(40, {{"reasoning_budget", 6}}));
  ASSERT_EQ(r.status, 200) << r.text;
  const json& m = r.body["choices"][0]["message"];
  ASSERT_TRUE(m["content"].is_string()) << m;
  EXPECT_FALSE(m["content"].get<std::string>().empty()) << m;
  // Six tokens of at most two bytes (the tiny vocabulary's merges), whitespace trimmed.
  ASSERT_TRUE(m["reasoning_content"].is_string()) << m;
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty()) << m;
  EXPECT_LE(m["reasoning_content"].get<std::string>().size(), 12u) << m;

  // Streamed: the same split, reasoning_content deltas first.
  const Reply s = post(*h_, "/v1/chat/completions", chat(40, {{"reasoning_budget", 6}, {"stream", true}}));
  ASSERT_EQ(s.status, 200);
  std::string reasoning, content;
  bool content_seen = false;
  for (const json& e : sse_events(s.text)) {
    if (!e.is_object()) continue;
    const json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) {
      EXPECT_FALSE(content_seen) << "reasoning after the answer began";
      reasoning += d["reasoning_content"].get<std::string>();
    }
    if (d.contains("content") && d["content"].is_string()) {
      content += d["content"].get<std::string>();
      content_seen = content_seen || !d["content"].get<std::string>().empty();
    }
  }
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(content, m["content"]);

  // The Responses API: a reasoning item, then the message.
  const Reply resp = post(*h_, "/v1/responses",
                          json{{"input", "Why?"}, {"max_output_tokens", 40}, {"ignore_eos", true}, {"temperature", 0.9},
                               {"seed", 5}, {"reasoning_budget", 6}});
  ASSERT_EQ(resp.status, 400) << "ignore_eos is not a Responses field";
  const Reply resp2 = post(*h_, "/v1/responses", json{{"input", "Why?"}, {"max_output_tokens", 40}, {"temperature", 0},
                                                      {"reasoning_budget", 0}, {"logit_bias", printable()}});
  ASSERT_EQ(resp2.status, 200) << resp2.text;
  const json& out = resp2.body["output"];
  ASSERT_GE(out.size(), 1u) << out;
  EXPECT_NE(out.back()["type"], "reasoning") << out;  // with no budget the answer comes at once
}

TEST_F(ReasoningHttp, TheResponsesApiHasAReasoningItem) {
  const Reply r = post(*h_, "/v1/responses", json{{"input", "Why?"}, {"max_output_tokens", 30}, {"temperature", 0.9},
                                                  {"seed", 5}, {"reasoning_budget", 8}, {"stream", true},
                                                  {"logit_bias", printable()}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_NE(r.text.find("event: response.reasoning_text.delta"), std::string::npos) << r.text;
  const size_t done = r.text.rfind("data: ");
  const json final_event = json::parse(r.text.substr(done + 6));
  const json& out = final_event["response"]["output"];
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0]["type"], "reasoning") << out;
  EXPECT_FALSE(out[0]["content"][0]["text"].get<std::string>().empty()) << out;
}

TEST_F(ReasoningHttp, ChatTemplateKwargsReachTheTemplate) {
  // enable_thinking false: the template closes the reasoning itself, and the output is all answer.
  const Reply r = post(*h_, "/v1/chat/completions", chat(12, {{"chat_template_kwargs", {{"enable_thinking", false}}}}));
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_TRUE(r.body["choices"][0]["message"]["reasoning_content"].is_null()) << r.text;
  EXPECT_FALSE(r.body["choices"][0]["message"]["content"].get<std::string>().empty()) << r.text;
  const Reply bad = post(*h_, "/v1/chat/completions", chat(4, {{"chat_template_kwargs", {{"messages", 1}}}}));
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["error"]["param"], "chat_template_kwargs");
  const Reply negative = post(*h_, "/v1/chat/completions", chat(4, {{"reasoning_budget", -2}}));
  EXPECT_EQ(negative.status, 400);
  const Reply constrained = post(*h_, "/v1/chat/completions",
                                 chat(4, {{"reasoning_budget", 2}, {"response_format", {{"type", "json_object"}}}}));
  EXPECT_EQ(constrained.status, 400);
  EXPECT_EQ(constrained.body["error"]["param"], "reasoning_budget");
}

TEST_F(ReasoningHttp, MessagesThinkingSwitchesTheTemplate) {
  auto message = [](json thinking) {
    return json{{"model", "test-model"},
                {"max_tokens", 16},
                {"messages", {{{"role", "user"}, {"content", "Why?"}}}},
                {"thinking", std::move(thinking)}};
  };
  const Reply on = post(*h_, "/v1/messages", message({{"type", "enabled"}, {"budget_tokens", 4}}));
  ASSERT_EQ(on.status, 200) << on.text;
  for (const json& block : on.body["content"]) EXPECT_TRUE(block["type"] == "thinking" || block["type"] == "text") << on.text;
  const Reply off = post(*h_, "/v1/messages", message({{"type", "disabled"}}));
  ASSERT_EQ(off.status, 200) << off.text;
  for (const json& block : off.body["content"]) EXPECT_EQ(block["type"], "text") << off.text;
  const Reply bad = post(*h_, "/v1/messages", message({{"type", "enabled"}}));
  EXPECT_EQ(bad.status, 400) << bad.text;
}

TEST(ReasoningModels, AModelWithoutThinkTagsRefusesABudget) {
  HttpHarness h(tiny_model());  // ChatML: no think tags
  const Reply r = post(h, "/v1/chat/completions",
                       json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}, {"reasoning_budget", 5}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "reasoning_budget");
  const Reply plain = post(h, "/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 3}});
  EXPECT_FALSE(plain.body["choices"][0]["message"].contains("reasoning_content")) << plain.text;
}

// The real Qwen3 template (scripts/fetch_templates.sh): recognised as a reasoning template, and
// enable_thinking false writes the closed empty reasoning into the prompt.
TEST(ReasoningModels, Qwen3TemplateEnableThinking) {
  const std::string path = std::string(FLASHSERVE_TEMPLATES_DIR) + "/qwen3.jinja";
  ASSERT_TRUE(std::ifstream(path).good()) << "no " << path << " (run scripts/fetch_templates.sh)";
  EngineOptions engine = test_engine_options();
  engine.chat_template_file = path;
  Serving serving(tiny_model(), "qwen3-template", engine, nullptr);
  ASSERT_TRUE(serving.reasoning_tags());
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "hi"}])");
  const std::string thinking = serving.tokenizer().decode(serving.chat_prompt(messages, nullptr));
  const std::string direct = serving.tokenizer().decode(
      serving.chat_prompt(messages, nullptr, nlohmann::ordered_json{{"enable_thinking", false}}));
  EXPECT_TRUE(thinking.ends_with("<|im_start|>assistant\n")) << thinking;
  EXPECT_TRUE(direct.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << direct;
  // Neither leaves the model inside the reasoning: Qwen3 opens it itself.
  EXPECT_FALSE(serving.opens_reasoning(serving.chat_prompt(messages, nullptr)));

  // --reasoning-parser none: never split.
  engine.reasoning_parser = "none";
  EXPECT_FALSE(Serving(tiny_model(), "q", engine, nullptr).reasoning_tags());
}

}  // namespace
}  // namespace flashserve::test
