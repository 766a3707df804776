// The OpenAI-compatible HTTP API in-process, on the tiny random model: every endpoint, completions
// and chat, streamed and not, their response shapes and how the fields reach the engine.
#include <gtest/gtest.h>

#include <set>

#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

class HttpApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { h_ = new HttpHarness(tiny_model()); }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  // Greedy and long enough to say something: ignore_eos keeps the random model from stopping early.
  static json greedy(json body, int max_tokens = 12) {
    body["temperature"] = 0;
    body["max_tokens"] = max_tokens;
    body["ignore_eos"] = true;
    return body;
  }
  static std::vector<int32_t> tokenize(const std::string& text) {
    return post(*h_, "/tokenize", json{{"prompt", text}}).body["tokens"].get<std::vector<int32_t>>();
  }
  static HttpHarness* h_;
};
HttpHarness* HttpApi::h_ = nullptr;

TEST_F(HttpApi, HealthReadyModelsMetrics) {
  EXPECT_EQ(get(*h_, "/health").status, 200);
  const Reply ready = get(*h_, "/ready");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body["status"], "ready");

  const Reply models = get(*h_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.body["object"], "list");
  ASSERT_EQ(models.body["data"].size(), 1u);
  const json& m = models.body["data"][0];
  EXPECT_EQ(m["id"], "test-model");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(m["owned_by"], "flashserve");
  EXPECT_EQ(m["max_model_len"], tiny_model().config().context_len);
  EXPECT_GT(m["created"].get<int64_t>(), 1600000000);

  const Reply metrics = get(*h_, "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.text, "# flashserve test metrics\n");
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4; charset=utf-8");
}

TEST_F(HttpApi, CompletionShape) {
  const Reply r = post(*h_, "/v1/completions", greedy({{"model", "test-model"}, {"prompt", "hello"}}, 8));
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.content_type, "application/json");
  const json& b = r.body;
  EXPECT_TRUE(b["id"].get<std::string>().starts_with("cmpl-"));
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["model"], "test-model");
  EXPECT_GT(b["created"].get<int64_t>(), 1600000000);
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(b["choices"][0]["index"], 0);
  EXPECT_TRUE(b["choices"][0]["text"].is_string());
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  const size_t prompt_len = tokenize("hello").size();
  EXPECT_EQ(b["usage"]["prompt_tokens"], prompt_len);
  EXPECT_EQ(b["usage"]["completion_tokens"], 8);
  EXPECT_EQ(b["usage"]["total_tokens"], prompt_len + 8);
}

// A request's clock starts at its first byte: time spent arriving and waiting for a worker counts
// in its queue time and TTFT (the engine used to start it only at submission).
TEST_F(HttpApi, QueueTimeCountsFromTheFirstByte) {
  const std::string body = greedy({{"prompt", "hi"}}, 2).dump();
  RawConnection c(h_->server.port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                     "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  c.send_more(body);
  EXPECT_NE(c.read_until("\"usage\"").find("HTTP/1.1 200"), std::string::npos);
  ASSERT_EQ(h_->recorder.finishes().back(), FinishReason::Length);
  const RequestTimings t = h_->recorder.last_timings();
  EXPECT_GE(t.first_scheduled - t.arrival, std::chrono::milliseconds(280));
  EXPECT_GE(t.first_token - t.arrival, std::chrono::milliseconds(280));
}

TEST_F(HttpApi, ModelMayBeOmittedAndUserIsAccepted) {
  const Reply r = post(*h_, "/v1/completions", greedy({{"prompt", "hi"}, {"user", "u1"}}, 2));
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["model"], "test-model");
}

// OpenAI's defaults: 16 tokens for completions; chat may use the rest of the context window.
TEST_F(HttpApi, DefaultMaxTokensFollowOpenAI) {
  const Reply r = post(*h_, "/v1/completions", json{{"prompt", "hi"}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 16);
  EXPECT_EQ(r.body["choices"][0]["finish_reason"], "length");
  const Reply chat = post(*h_, "/v1/chat/completions",
                          json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(chat.status, 200) << chat.text;
  EXPECT_EQ(chat.body["usage"]["total_tokens"], tiny_model().config().context_len);
  EXPECT_EQ(chat.body["choices"][0]["finish_reason"], "length");
}

// --max-tokens-default: the default of both endpoints, a chat's still capped by the window.
TEST(HttpMaxTokensDefault, ReplacesTheDefaultsButNotAnAskedMaxTokens) {
  EngineOptions options = test_engine_options();
  options.max_tokens_default = 5;
  HttpHarness h(tiny_model(), options);
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"temperature", 0}, {"ignore_eos", true}};
  const json completion = {{"prompt", "hi"}, {"temperature", 0}, {"ignore_eos", true}};
  for (const auto& [path, body] : {std::pair{"/v1/chat/completions", chat}, std::pair{"/v1/completions", completion}}) {
    SCOPED_TRACE(path);
    const Reply r = post(h, path, body);
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 5);
    json asked = body;
    asked["max_tokens"] = 7;
    const Reply more = post(h, path, asked);
    ASSERT_EQ(more.status, 200) << more.text;
    EXPECT_EQ(more.body["usage"]["completion_tokens"], 7);
  }
}

TEST_F(HttpApi, PromptFormsAgree) {
  const std::vector<int32_t> ids = tokenize("the cat");
  const std::string as_text = post(*h_, "/v1/completions", greedy({{"prompt", "the cat"}})).body["choices"][0]["text"];
  const Reply as_ids = post(*h_, "/v1/completions", greedy({{"prompt", ids}}));
  ASSERT_EQ(as_ids.status, 200) << as_ids.text;
  EXPECT_EQ(as_ids.body["choices"][0]["text"], as_text);

  // Several prompts: one choice each, in order; prompt tokens counted once per prompt.
  const std::vector<int32_t> other = tokenize("a dog");
  for (const json& prompts : {json{"the cat", "a dog"}, json{ids, other}}) {
    const Reply r = post(*h_, "/v1/completions", greedy({{"prompt", prompts}}));
    ASSERT_EQ(r.status, 200) << r.text;
    ASSERT_EQ(r.body["choices"].size(), 2u);
    EXPECT_EQ(r.body["choices"][0]["index"], 0);
    EXPECT_EQ(r.body["choices"][0]["text"], as_text);
    EXPECT_EQ(r.body["choices"][1]["index"], 1);
    EXPECT_EQ(r.body["usage"]["prompt_tokens"], ids.size() + other.size());
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 24);
  }
}

TEST_F(HttpApi, NChoicesWithSeeds) {
  json body = {{"prompt", "once upon"}, {"n", 2}, {"seed", 7}, {"max_tokens", 10}, {"ignore_eos", true}};
  const Reply r = post(*h_, "/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  ASSERT_EQ(r.body["choices"].size(), 2u);
  EXPECT_EQ(r.body["choices"][0]["index"], 0);
  EXPECT_EQ(r.body["choices"][1]["index"], 1);
  EXPECT_EQ(r.body["usage"]["completion_tokens"], 20);
  // Choice i is seeded with seed + i: the same as asking for n=1 with that seed.
  body["n"] = 1;
  body["seed"] = 8;
  EXPECT_EQ(post(*h_, "/v1/completions", body).body["choices"][0]["text"], r.body["choices"][1]["text"]);

  // Two prompts, two choices each: index = prompt * n + i.
  body["prompt"] = {"once upon", "a time"};
  body["n"] = 2;
  const Reply four = post(*h_, "/v1/completions", body);
  ASSERT_EQ(four.status, 200) << four.text;
  ASSERT_EQ(four.body["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(four.body["choices"][i]["index"], i);
}

// A request's own speculative decoding changes how many tokens a step brings, never which.
TEST_F(HttpApi, SpeculativeFieldsKeepTheText) {
  json body = greedy({{"prompt", "abcabcabcabcabcabc"}}, 40);
  body["ignore_eos"] = true;
  const Reply plain = post(*h_, "/v1/completions", body);
  ASSERT_EQ(plain.status, 200) << plain.text;
  for (const char* method : {"ngram", "suffix", "off"}) {
    body["speculative"] = method;
    body["num_speculative_tokens"] = 4;
    const Reply r = post(*h_, "/v1/completions", body);
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["choices"][0]["text"], plain.body["choices"][0]["text"]) << method;
    EXPECT_EQ(r.body["usage"]["completion_tokens"], 40);
  }
}

TEST_F(HttpApi, CompletionStream) {
  const json body = greedy({{"prompt", "stream me"}}, 10);
  const std::string expected = post(*h_, "/v1/completions", body).body["choices"][0]["text"];
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  auto c = h_->client();
  auto res = c.Post("/v1/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<json> events = sse_events(res->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& usage_chunk = events[events.size() - 2];
  EXPECT_TRUE(usage_chunk["choices"].is_array() && usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 10);
  std::string text;
  const std::string id = events[0]["id"];
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["object"], "text_completion");
    EXPECT_EQ(e["id"], id);
    EXPECT_TRUE(e.contains("usage") && e["usage"].is_null());
    text += e["choices"][0]["text"].get<std::string>();
    const bool last = i + 3 == events.size();
    EXPECT_EQ(e["choices"][0]["finish_reason"], last ? json("length") : json(nullptr));
  }
  EXPECT_EQ(text, expected);
}

TEST_F(HttpApi, StreamWithoutUsageHasNoUsageChunk) {
  json body = greedy({{"prompt", "x"}}, 4);
  body["stream"] = true;
  const std::vector<json> events = sse_events(post(*h_, "/v1/completions", body).text);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    EXPECT_FALSE(events[i].contains("usage"));
    EXPECT_EQ(events[i]["choices"].size(), 1u);
  }
}

TEST_F(HttpApi, ChatShape) {
  const json body = greedy({{"messages", {{{"role", "system"}, {"content", "be brief"}}, {{"role", "user"}, {"content", "hi"}}}}}, 6);
  const Reply r = post(*h_, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  const json& b = r.body;
  EXPECT_TRUE(b["id"].get<std::string>().starts_with("chatcmpl-"));
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["model"], "test-model");
  ASSERT_EQ(b["choices"].size(), 1u);
  EXPECT_EQ(b["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(b["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(b["usage"]["completion_tokens"], 6);
  const Reply tokens = post(*h_, "/tokenize", json{{"messages", body["messages"]}});
  EXPECT_EQ(b["usage"]["prompt_tokens"], tokens.body["count"]);

  // Text parts are concatenated: the same prompt, the same answer.
  json parts = body;
  parts["messages"][1]["content"] = {{{"type", "text"}, {"text", "h"}}, {{"type", "text"}, {"text", "i"}}};
  EXPECT_EQ(post(*h_, "/v1/chat/completions", parts).body["choices"][0]["message"]["content"],
            b["choices"][0]["message"]["content"]);
}

TEST_F(HttpApi, ChatStream) {
  const json body = greedy({{"messages", {{{"role", "user"}, {"content", "tell me"}}}}, {"n", 2}}, 8);
  const Reply whole = post(*h_, "/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.text;
  json streamed = body;
  streamed["stream"] = true;
  streamed["stream_options"] = {{"include_usage", true}};
  const Reply r = post(*h_, "/v1/chat/completions", streamed);
  ASSERT_EQ(r.status, 200);
  const std::vector<json> events = sse_events(r.text);
  ASSERT_GE(events.size(), 6u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& usage_chunk = events[events.size() - 2];
  EXPECT_TRUE(usage_chunk["choices"].empty());
  // Token counts match; the streamed request found the first one's prompt in the prefix cache.
  for (const char* key : {"prompt_tokens", "completion_tokens", "total_tokens"}) {
    EXPECT_EQ(usage_chunk["usage"][key], whole.body["usage"][key]) << key;
  }
  EXPECT_EQ(whole.body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens_details"]["cached_tokens"], 16);
  EXPECT_EQ(usage_chunk["object"], "chat.completion.chunk");

  // Per choice: a role chunk first, then content deltas, then an empty delta with the reason.
  std::vector<std::string> text(2);
  std::vector<int> stage(2, 0);  // 0: expect role, 1: content, 2: finished
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json& e = events[i];
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    ASSERT_EQ(e["choices"].size(), 1u);
    const json& c = e["choices"][0];
    const int idx = c["index"];
    ASSERT_TRUE(idx == 0 || idx == 1);
    if (stage[idx] == 0) {
      EXPECT_EQ(c["delta"], json({{"role", "assistant"}, {"content", ""}}));
      stage[idx] = 1;
    } else if (!c["finish_reason"].is_null()) {
      EXPECT_EQ(c["finish_reason"], "length");
      EXPECT_EQ(c["delta"], json::object());
      stage[idx] = 2;
    } else {
      ASSERT_EQ(stage[idx], 1);
      text[idx] += c["delta"]["content"].get<std::string>();
    }
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(stage[i], 2);
    EXPECT_EQ(text[i], whole.body["choices"][i]["message"]["content"]);
  }
}

TEST_F(HttpApi, CompletionLogprobs) {
  const Reply r = post(*h_, "/v1/completions", greedy({{"prompt", "log"}, {"logprobs", 2}}, 6));
  ASSERT_EQ(r.status, 200) << r.text;
  const json& lp = r.body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u);
  ASSERT_EQ(lp["token_logprobs"].size(), 6u);
  ASSERT_EQ(lp["top_logprobs"].size(), 6u);
  ASSERT_EQ(lp["text_offset"].size(), 6u);
  EXPECT_EQ(lp["text_offset"][0], 0);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]);
    }
    const json& top = lp["top_logprobs"][i];
    // Greedy: the sampled token is the best one, so it is among the top 2.
    EXPECT_EQ(top.size(), 2u);
    EXPECT_TRUE(top.contains(lp["tokens"][i].get<std::string>()));
  }
  // Streamed, the same numbers arrive chunk by chunk.
  json body = greedy({{"prompt", "log"}, {"logprobs", 2}, {"stream", true}}, 6);
  std::vector<double> streamed;
  for (const json& e : sse_events(post(*h_, "/v1/completions", body).text)) {
    if (e == "[DONE]" || e["choices"][0]["logprobs"].is_null()) continue;
    for (const json& v : e["choices"][0]["logprobs"]["token_logprobs"]) streamed.push_back(v);
  }
  EXPECT_EQ(json(streamed), lp["token_logprobs"]);
}

TEST_F(HttpApi, ChatLogprobs) {
  json body = greedy({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"logprobs", true}, {"top_logprobs", 3}}, 5);
  const Reply r = post(*h_, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.text;
  const json& content = r.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  for (const json& t : content) {
    EXPECT_TRUE(t["token"].is_string());
    EXPECT_LE(t["logprob"].get<double>(), 0.0);
    EXPECT_TRUE(t["bytes"].is_array());
    ASSERT_EQ(t["top_logprobs"].size(), 3u);
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);  // greedy: the best is the one taken
    for (const json& b : t["bytes"]) EXPECT_TRUE(b.get<int>() >= 0 && b.get<int>() < 256);
  }
  body.erase("top_logprobs");
  body["logprobs"] = false;
  EXPECT_TRUE(post(*h_, "/v1/chat/completions", body).body["choices"][0]["logprobs"].is_null());
}

TEST_F(HttpApi, StopStringEndsTheText) {
  const json body = greedy({{"prompt", "stop here"}}, 24);
  const std::string full = post(*h_, "/v1/completions", body).body["choices"][0]["text"];
  // Stop on an ASCII character the greedy answer contains past its start.
  size_t k = 1;
  while (k < full.size() && static_cast<unsigned char>(full[k]) >= 0x80) ++k;
  ASSERT_LT(k, full.size()) << "no ASCII character in " << json(full);
  const std::string stop(1, full[k]);
  for (const json& stop_field : {json(stop), json{stop, "never-appears"}}) {
    json with_stop = body;
    with_stop["stop"] = stop_field;
    const Reply r = post(*h_, "/v1/completions", with_stop);
    ASSERT_EQ(r.status, 200) << r.text;
    EXPECT_EQ(r.body["choices"][0]["text"], full.substr(0, full.find(stop)));
    EXPECT_EQ(r.body["choices"][0]["finish_reason"], "stop");
  }
}

TEST_F(HttpApi, SamplingFieldsReachTheEngine) {
  // A huge bias on one token makes greedy decoding pick it every time.
  const int32_t forced = 'Z';
  json body = greedy({{"prompt", "abc"}, {"logit_bias", {{std::to_string(forced), 100}}}}, 5);
  EXPECT_EQ(post(*h_, "/v1/completions", body).body["choices"][0]["text"], "ZZZZZ");
  // The same seed gives the same sample at temperature 1 with top_k, top_p and min_p set.
  json sampled = {{"prompt", "abc"},    {"max_tokens", 8},  {"seed", 3},       {"top_k", 40},     {"top_p", 0.9},
                  {"min_p", 0.01},      {"ignore_eos", true}, {"presence_penalty", 0.5}, {"frequency_penalty", 0.5},
                  {"repetition_penalty", 1.1}};
  const Reply a = post(*h_, "/v1/completions", sampled);
  ASSERT_EQ(a.status, 200) << a.text;
  EXPECT_EQ(post(*h_, "/v1/completions", sampled).body["choices"][0]["text"], a.body["choices"][0]["text"]);
  // max_completion_tokens counts as max_tokens.
  json mct = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_completion_tokens", 3}, {"ignore_eos", true}};
  EXPECT_EQ(post(*h_, "/v1/chat/completions", mct).body["usage"]["completion_tokens"], 3);
}

TEST_F(HttpApi, TokenizeAndDetokenize) {
  const Reply t = post(*h_, "/tokenize", json{{"prompt", "hello world"}});
  ASSERT_EQ(t.status, 200) << t.text;
  EXPECT_EQ(t.body["count"], t.body["tokens"].size());
  EXPECT_EQ(t.body["max_model_len"], tiny_model().config().context_len);
  const Reply plain = post(*h_, "/tokenize", json{{"prompt", "hello world"}, {"add_special_tokens", false}});
  const Reply d = post(*h_, "/detokenize", json{{"tokens", plain.body["tokens"]}});
  ASSERT_EQ(d.status, 200) << d.text;
  EXPECT_EQ(d.body["prompt"], "hello world");
  EXPECT_EQ(post(*h_, "/detokenize", json{{"tokens", {1, 99999}}}).status, 400);
  EXPECT_EQ(post(*h_, "/tokenize", json{{"text", "x"}}).status, 400);
  const Reply chat = post(*h_, "/tokenize", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_EQ(chat.status, 200) << chat.text;
  // <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n, the markers one token each.
  EXPECT_EQ(chat.body["tokens"][0], 259);
  EXPECT_GT(chat.body["count"].get<int>(), 6);
}

TEST_F(HttpApi, DeeplyNestedJsonIsRefusedNotCrashed) {
  const size_t depth = 200000;
  EXPECT_EQ(post(*h_, "/v1/completions", std::string(depth, '[')).status, 400);
  EXPECT_EQ(post(*h_, "/v1/completions", std::string(depth, '[') + std::string(depth, ']')).status, 400);
  const std::string nested_prompt = "{\"prompt\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
  EXPECT_EQ(post(*h_, "/v1/completions", nested_prompt).status, 400);
}

TEST_F(HttpApi, ConcurrentRequests) {
  std::vector<std::thread> threads;
  std::vector<int> statuses(8, 0);
  std::vector<std::string> texts(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      json body = greedy({{"prompt", "same prompt"}}, 16);
      body["stream"] = i % 2 == 1;
      const Reply r = post(*h_, "/v1/completions", body);
      statuses[i] = r.status;
      if (i % 2 == 0) texts[i] = r.body["choices"][0]["text"];
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(statuses[i], 200);
  // Batched or not, greedy answers are the same.
  for (int i = 2; i < 8; i += 2) EXPECT_EQ(texts[i], texts[0]);
  EXPECT_TRUE(all_blocks_free(h_->serving));
}


// With --batch-invariant (the CPU always is), a request's tokens and log-probabilities do not
// depend on what else runs: the probe is answered alone, then again while 63 other requests decode
// beside it (streams that are hung up on once the probe is done), and the two answers agree to the
// bit. test_http_cuda_emu runs this on the GPU kernels.
TEST(HttpBatchInvariance, ARequestIsTheSameAloneAndAmong63Others) {
  // Quantized matrices: past 8 rows the GPU's default mode multiplies them with cuBLASLt instead
  // of the GEMV, so without the flag the runners-up's logprobs differ (checked).
  TinyModelSpec spec = tiny_spec_for_server();
  spec.matrix_type = kernels::DType::Q8_0;
  // The others must still be running once the last of them has arrived, however slowly this
  // machine accepts them: each may decode to a context of 8192 tokens (512 KV bytes a token), with
  // room for all 64 sequences to reach it, so none finishes or is preempted first.
  spec.context_len = 8192;
  const std::unique_ptr<Model> model = load_tiny_model(spec, "invariance");
  EngineOptions options = test_engine_options(int64_t(64 * 8192) * 512);
  options.batch_invariant = true;
  HttpHarness h(*model, options);
  const json probe = {{"prompt", "the probe"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true},
                      {"logprobs", 5}};
  const Reply alone = post(h, "/v1/completions", probe);
  ASSERT_EQ(alone.status, 200) << alone.text;

  std::vector<std::unique_ptr<RawConnection>> others;
  for (int i = 0; i < 63; ++i) {
    const json body = {{"prompt", "another prompt, number " + std::to_string(i) + std::string(size_t(i % 7), '!')},
                       {"max_tokens", 8000}, {"ignore_eos", true}, {"stream", true}};
    others.push_back(std::make_unique<RawConnection>(h.server.port(), "/v1/completions", body.dump()));
  }
  bool all_running = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(120); !all_running && Clock::now() < deadline;) {
    all_running = h.serving.stats().num_running == 63;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(all_running) << "the other 63 requests never ran together";
  const Reply batched = post(h, "/v1/completions", probe);
  EXPECT_EQ(h.serving.stats().num_running, 63) << "some of the others stopped before the probe was done";
  others.clear();  // hung up on: they are cancelled

  ASSERT_EQ(batched.status, 200) << batched.text;
  const json& a = alone.body["choices"][0];
  const json& b = batched.body["choices"][0];
  EXPECT_EQ(b["text"], a["text"]);
  EXPECT_EQ(b["logprobs"]["tokens"], a["logprobs"]["tokens"]);
  // Doubles, compared exactly. The random model is so sure of its next token that the sampled one's
  // logprob is 0; the four runners-up (near -50) carry the bits.
  EXPECT_EQ(b["logprobs"]["token_logprobs"], a["logprobs"]["token_logprobs"]);
  EXPECT_EQ(b["logprobs"]["top_logprobs"], a["logprobs"]["top_logprobs"]);
  EXPECT_TRUE(all_blocks_free(h.serving, std::chrono::seconds(30)));
}

}  // namespace
}  // namespace flashserve::test
