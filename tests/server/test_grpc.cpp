// The gRPC API in process, on the tiny random model: generation (unary and streamed), parameters,
// logprobs, tokenization, model info, health, and the argument errors.
#include <gtest/gtest.h>

#include <functional>
#include <regex>

#include <nlohmann/json.hpp>

#include "tests/server/grpc_harness.h"
#include "tests/util/server_process.h"

namespace flashserve::test {
namespace {

class GrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = load_tiny_model(tiny_spec_for_server(), "grpc").release();
  }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override { h_ = std::make_unique<GrpcHarness>(*model_); }

  pb::GenerateResponse generate(const pb::GenerateRequest& req) {
    grpc::ClientContext ctx;
    pb::GenerateResponse resp;
    grpc::Status s = h_->stub->Generate(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }
  grpc::Status generate_status(const pb::GenerateRequest& req) {
    grpc::ClientContext ctx;
    pb::GenerateResponse resp;
    return h_->stub->Generate(&ctx, req, &resp);
  }
  std::vector<pb::GenerateStreamResponse> stream(const pb::GenerateRequest& req) {
    grpc::ClientContext ctx;
    auto reader = h_->stub->GenerateStream(&ctx, req);
    std::vector<pb::GenerateStreamResponse> msgs;
    for (pb::GenerateStreamResponse m; reader->Read(&m);) msgs.push_back(m);
    grpc::Status s = reader->Finish();
    EXPECT_TRUE(s.ok()) << s.error_message();
    return msgs;
  }

  static Model* model_;
  std::unique_ptr<GrpcHarness> h_;
};
Model* GrpcTest::model_ = nullptr;

std::vector<int32_t> ids_of(const google::protobuf::RepeatedPtrField<pb::GeneratedToken>& tokens) {
  std::vector<int32_t> ids;
  for (const pb::GeneratedToken& t : tokens) ids.push_back(t.token_id());
  return ids;
}

TEST_F(GrpcTest, StreamedTextAndTokensEqualUnary) {
  const std::string prompt = "hello world, hello world, hello world, hello world";  // > 2 KV blocks
  pb::GenerateRequest req = text_request(prompt, 40);
  req.mutable_stopping()->set_ignore_eos(true);
  const pb::GenerateResponse unary = generate(req);
  EXPECT_EQ(unary.finish_reason(), pb::FINISH_REASON_LENGTH);
  EXPECT_EQ(unary.tokens_size(), 40);
  EXPECT_EQ(unary.usage().completion_tokens(), 40);
  EXPECT_EQ(unary.usage().prompt_tokens(), int32_t(h_->serving.text_prompt(prompt).size()));
  EXPECT_EQ(unary.usage().cached_prompt_tokens(), 0);
  EXPECT_FALSE(unary.id().empty());

  const std::vector<pb::GenerateStreamResponse> msgs = stream(req);
  ASSERT_FALSE(msgs.empty());
  std::string text;
  std::vector<int32_t> ids;
  for (size_t i = 0; i < msgs.size(); ++i) {
    text += msgs[i].text();
    for (int32_t id : ids_of(msgs[i].tokens())) ids.push_back(id);
    EXPECT_EQ(msgs[i].id(), msgs[0].id());
    const bool last = i + 1 == msgs.size();
    EXPECT_EQ(msgs[i].finish_reason() != pb::FINISH_REASON_UNSPECIFIED, last) << "message " << i;
    EXPECT_EQ(msgs[i].has_usage(), last) << "message " << i;
  }
  EXPECT_EQ(text, unary.text());
  EXPECT_EQ(ids, ids_of(unary.tokens()));
  EXPECT_EQ(msgs.back().finish_reason(), pb::FINISH_REASON_LENGTH);
  EXPECT_EQ(msgs.back().usage().completion_tokens(), 40);
  EXPECT_EQ(msgs.back().usage().prompt_tokens(), unary.usage().prompt_tokens());
  // The prompt was seen before, so its full blocks now come from the prefix cache.
  EXPECT_GT(msgs.back().usage().cached_prompt_tokens(), 0);
}

TEST_F(GrpcTest, UnsetFieldsTakeDocumentedDefaults) {
  pb::GenerateRequest req;
  req.set_text("hello");
  req.mutable_stopping()->set_ignore_eos(true);
  const pb::GenerateResponse resp = generate(req);
  EXPECT_EQ(resp.usage().completion_tokens(), 16);  // max_tokens default
  EXPECT_TRUE(resp.tokens(0).top_logprobs().empty());
}

TEST_F(GrpcTest, SeedMakesSamplingReproducible) {
  pb::GenerateRequest req = text_request("hello", 24, /*temperature=*/1.0f);
  req.mutable_sampling()->set_seed(7);
  req.mutable_stopping()->set_ignore_eos(true);
  EXPECT_EQ(ids_of(generate(req).tokens()), ids_of(generate(req).tokens()));
}

TEST_F(GrpcTest, SpeculativeDecodingKeepsTheTokens) {
  pb::GenerateRequest req = text_request("hello hello hello hello hello", 32);
  req.mutable_stopping()->set_ignore_eos(true);
  const std::vector<int32_t> plain = ids_of(generate(req).tokens());
  req.mutable_speculative()->set_method("ngram");
  req.mutable_speculative()->set_num_tokens(5);
  EXPECT_EQ(ids_of(generate(req).tokens()), plain);
  std::vector<int32_t> streamed;
  for (const pb::GenerateStreamResponse& m : stream(req)) {
    for (int32_t id : ids_of(m.tokens())) streamed.push_back(id);
  }
  EXPECT_EQ(streamed, plain);
}

TEST_F(GrpcTest, StopTokenEndsGeneration) {
  pb::GenerateRequest req = text_request("hello", 20);
  req.mutable_stopping()->set_ignore_eos(true);
  const std::vector<int32_t> free_run = ids_of(generate(req).tokens());
  ASSERT_EQ(free_run.size(), 20u);
  req.mutable_stopping()->add_stop_token_ids(free_run[5]);
  const pb::GenerateResponse stopped = generate(req);
  EXPECT_EQ(stopped.finish_reason(), pb::FINISH_REASON_STOP);
  EXPECT_LE(stopped.usage().completion_tokens(), 6);
}

TEST_F(GrpcTest, LogprobsCarryAlternativesWithText) {
  pb::GenerateRequest req = text_request("hello", 8);
  req.mutable_sampling()->set_logprobs(3);
  const pb::GenerateResponse resp = generate(req);
  ASSERT_GT(resp.tokens_size(), 0);
  const Tokenizer& tok = h_->serving.tokenizer();
  for (const pb::GeneratedToken& t : resp.tokens()) {
    ASSERT_EQ(t.top_logprobs_size(), 3);
    EXPECT_LE(t.logprob(), 0.0f);
    EXPECT_EQ(t.top_logprobs(0).token_id(), t.token_id());  // greedy picks the best
    EXPECT_FLOAT_EQ(t.top_logprobs(0).logprob(), t.logprob());
    EXPECT_GE(t.top_logprobs(0).logprob(), t.top_logprobs(1).logprob());
    const std::string bytes = tok.token_bytes(t.token_id());
    if (bytes.size() == 1 && static_cast<unsigned char>(bytes[0]) < 0x80) {
      EXPECT_EQ(t.top_logprobs(0).token(), bytes);
    }
  }
}

TEST_F(GrpcTest, TokenizeDetokenizeRoundTrip) {
  const std::string text = "hello world, <|im_start|>caf\xc3\xa9";
  grpc::ClientContext ctx1;
  pb::TokenizeRequest treq;
  treq.set_text(text);
  pb::TokenizeResponse tresp;
  ASSERT_TRUE(h_->stub->Tokenize(&ctx1, treq, &tresp).ok());
  const std::vector<int32_t> ids(tresp.ids().begin(), tresp.ids().end());
  EXPECT_EQ(ids, h_->serving.tokenizer().encode(text, false, true));

  grpc::ClientContext ctx2;
  pb::DetokenizeRequest dreq;
  *dreq.mutable_ids() = tresp.ids();
  pb::DetokenizeResponse dresp;
  ASSERT_TRUE(h_->stub->Detokenize(&ctx2, dreq, &dresp).ok());
  EXPECT_EQ(dresp.text(), text);

  grpc::ClientContext ctx3;
  treq.set_add_special_tokens(true);
  ASSERT_TRUE(h_->stub->Tokenize(&ctx3, treq, &tresp).ok());
  const std::vector<int32_t> with_special(tresp.ids().begin(), tresp.ids().end());
  EXPECT_EQ(with_special, h_->serving.tokenizer().encode(text, true, true));
}

TEST_F(GrpcTest, DetokenizeSplitCharacterAndBadIds) {
  const std::vector<int32_t> e_acute = h_->serving.tokenizer().encode("\xc3\xa9", false, false);
  ASSERT_EQ(e_acute.size(), 2u);  // one byte token per byte
  grpc::ClientContext ctx1;
  pb::DetokenizeRequest req;
  req.add_ids(e_acute[0]);
  pb::DetokenizeResponse resp;
  ASSERT_TRUE(h_->stub->Detokenize(&ctx1, req, &resp).ok());
  EXPECT_EQ(resp.text(), "\xef\xbf\xbd");  // U+FFFD: a proto3 string must be valid UTF-8

  grpc::ClientContext ctx2;
  req.add_ids(kTinyVocab);
  EXPECT_EQ(h_->stub->Detokenize(&ctx2, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(GrpcTest, ModelInfoDescribesTheModel) {
  grpc::ClientContext ctx;
  pb::ModelInfo info;
  ASSERT_TRUE(h_->stub->GetModelInfo(&ctx, pb::GetModelInfoRequest(), &info).ok());
  const TinyModelSpec spec = tiny_spec_for_server();
  EXPECT_EQ(info.name(), "test-model");
  EXPECT_EQ(info.architecture(), "llama");
  EXPECT_EQ(info.context_length(), spec.context_len);
  EXPECT_EQ(info.vocab_size(), kTinyVocab);
  EXPECT_EQ(info.num_layers(), spec.num_layers);
  EXPECT_EQ(info.hidden_size(), spec.dim);
  EXPECT_EQ(info.num_heads(), spec.num_heads);
  EXPECT_EQ(info.num_kv_heads(), spec.num_kv_heads);
  EXPECT_EQ(info.kv_cache_blocks(), h_->serving.stats().num_kv_blocks);
  EXPECT_GT(info.kv_cache_blocks(), 0);
  EXPECT_EQ(info.kv_cache_block_size(), 16);
}

TEST_F(GrpcTest, HealthServingUntilSetNotServing) {
  constexpr int kServing = 1, kNotServing = 2;
  EXPECT_EQ(health_status(h_->channel, ""), kServing);
  EXPECT_EQ(health_status(h_->channel, "flashserve.v1.Generation"), kServing);
  EXPECT_EQ(health_status(h_->channel, "no.such.Service"), -1);  // NOT_FOUND
  h_->server.set_not_serving();
  EXPECT_EQ(health_status(h_->channel, ""), kNotServing);
  EXPECT_EQ(health_status(h_->channel, "flashserve.v1.Generation"), kNotServing);
}

TEST_F(GrpcTest, ChatMessagesUseTheTemplate) {
  pb::GenerateRequest req;
  auto* m = req.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content("hi");
  req.mutable_sampling()->set_temperature(0);
  const pb::GenerateResponse resp = generate(req);
  EXPECT_EQ(resp.usage().prompt_tokens(), int32_t(h_->serving.chat_prompt({{"user", "hi"}}).size()));

  m->set_role("robot");
  const grpc::Status bad_role = generate_status(req);
  EXPECT_EQ(bad_role.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(bad_role.error_message().find("robot"), std::string::npos) << bad_role.error_message();
}

TEST_F(GrpcTest, BadArgumentsAreInvalidArgument) {
  pb::GenerateRequest bad_top_p = text_request("hello", 4);
  bad_top_p.mutable_sampling()->set_top_p(1.5f);
  const grpc::Status s = generate_status(bad_top_p);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("top_p"), std::string::npos) << s.error_message();

  pb::GenerateRequest bad_token = text_request("", 4);
  bad_token.mutable_token_ids()->add_ids(kTinyVocab + 5);
  pb::GenerateRequest no_tokens = text_request("", 4);
  no_tokens.mutable_token_ids();
  pb::GenerateRequest no_messages = text_request("", 4);
  no_messages.mutable_messages();
  pb::GenerateRequest no_prompt = text_request("", 4);
  no_prompt.clear_prompt();
  pb::GenerateRequest bad_stop = text_request("hello", 4);
  for (int i = 0; i < 5; ++i) bad_stop.mutable_stopping()->add_stop("x" + std::to_string(i));
  pb::GenerateRequest bad_method = text_request("hello", 4);
  bad_method.mutable_speculative()->set_method("medusa");
  pb::GenerateRequest bad_k = text_request("hello", 4);
  bad_k.mutable_speculative()->set_num_tokens(kMaxSpeculativeTokens + 1);
  for (const pb::GenerateRequest& req :
       {text_request("", 4), bad_token, no_tokens, no_messages, no_prompt, bad_stop, bad_method, bad_k}) {
    EXPECT_EQ(generate_status(req).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.DebugString();
    grpc::ClientContext ctx;
    auto reader = h_->stub->GenerateStream(&ctx, req);
    pb::GenerateStreamResponse msg;
    EXPECT_FALSE(reader->Read(&msg));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.DebugString();
  }
}

// The Constraint message: what it asks for is what comes back, keys in the schema's order; what
// cannot be compiled is INVALID_ARGUMENT naming the problem.
TEST_F(GrpcTest, ConstraintsShapeTheOutput) {
  auto sampled = [](const char* prompt) {
    pb::GenerateRequest r = text_request(prompt, 400);
    r.mutable_sampling()->set_temperature(1.0f);
    r.mutable_sampling()->set_seed(7);
    return r;
  };
  pb::GenerateRequest regex = sampled("code");
  regex.mutable_constraint()->set_regex("[a-c]{3}-[0-9]{2}");
  const pb::GenerateResponse r1 = generate(regex);
  EXPECT_EQ(r1.finish_reason(), pb::FINISH_REASON_STOP);
  EXPECT_TRUE(std::regex_match(r1.text(), std::regex("[a-c]{3}-[0-9]{2}"))) << r1.text();

  pb::GenerateRequest schema = sampled("json");
  schema.mutable_constraint()->set_json_schema(
      R"({"type": "object", "properties": {"b": {"type": "integer", "minimum": 0, "maximum": 99},)"
      R"( "a": {"enum": ["x", "y"]}}, "required": ["b", "a"]})");
  schema.mutable_constraint()->set_strict(true);
  const pb::GenerateResponse r2 = generate(schema);
  EXPECT_EQ(r2.finish_reason(), pb::FINISH_REASON_STOP);
  const auto doc = nlohmann::ordered_json::parse(r2.text());
  ASSERT_EQ(doc.size(), 2u) << r2.text();
  EXPECT_EQ(doc.begin().key(), "b");
  EXPECT_TRUE(doc["b"].is_number_integer() && doc["b"] >= 0 && doc["b"] <= 99) << r2.text();
  EXPECT_TRUE(doc["a"] == "x" || doc["a"] == "y") << r2.text();

  pb::GenerateRequest gbnf = sampled("answer");
  gbnf.mutable_constraint()->set_grammar("root ::= \"yes\" | \"no\"");
  const std::string answer = generate(gbnf).text();
  EXPECT_TRUE(answer == "yes" || answer == "no") << answer;

  const std::pair<std::function<void(pb::Constraint&)>, const char*> bad[] = {
      {[](pb::Constraint& c) { c.set_grammar("root ::= missing"); }, "missing"},
      {[](pb::Constraint& c) { c.set_json_schema("{not json"); }, "not valid JSON"},
      {[](pb::Constraint& c) { c.set_json_schema(R"({"type": "string", "not": {}})"); }, "not"},
      {[](pb::Constraint& c) { c.set_regex("a(?=b)"); }, "look"},
  };
  for (const auto& [set, word] : bad) {
    pb::GenerateRequest req = sampled("x");
    set(*req.mutable_constraint());
    const grpc::Status s = generate_status(req);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << req.DebugString();
    EXPECT_NE(s.error_message().find(word), std::string::npos) << s.error_message();
  }
}

// What an attacker would send: a schema nested a million deep, a repetition whose token tables
// would take minutes, token lists far past the HTTP API's bounds. Each is INVALID_ARGUMENT, and
// the server goes on answering.
TEST_F(GrpcTest, HostileRequestsAreInvalidArgument) {
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');
  std::vector<std::pair<pb::GenerateRequest, const char*>> cases;
  cases.emplace_back(text_request("x", 4), "nested deeper than 128 levels");
  cases.back().first.mutable_constraint()->set_json_schema(R"({"anyOf": [)" + deep + "]}");
  cases.emplace_back(text_request("x", 4), "walks of the vocabulary");
  cases.back().first.mutable_constraint()->set_regex("[\\s\\S]{9990}");
  cases.emplace_back(text_request("x", 4), "logit_bias may hold at most 1024");
  for (int i = 0; i < 2000; ++i) (*cases.back().first.mutable_sampling()->mutable_logit_bias())[i % kTinyVocab + i] = 1;
  cases.emplace_back(text_request("x", 4), "stop_token_ids may hold at most 1024");
  for (int i = 0; i < 20000; ++i) cases.back().first.mutable_stopping()->add_stop_token_ids(i % kTinyVocab);
  for (const auto& [req, words] : cases) {
    const grpc::Status s = generate_status(req);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(words), std::string::npos) << s.error_message();
  }
  EXPECT_TRUE(generate_status(text_request("hello", 2)).ok());
}

TEST_F(GrpcTest, PromptBeyondContextIsOutOfRange) {
  // 600 byte tokens (no merge applies to "a"), beyond the 512-token context window.
  const grpc::Status too_long = generate_status(text_request(std::string(600, 'a'), 4));
  EXPECT_EQ(too_long.error_code(), grpc::StatusCode::OUT_OF_RANGE) << too_long.error_message();
  // Fits alone, but not with max_tokens on top.
  EXPECT_EQ(generate_status(text_request(std::string(500, 'a'), 100)).error_code(), grpc::StatusCode::OUT_OF_RANGE);
}

TEST_F(GrpcTest, DrainingIsUnavailable) {
  h_->serving.start_draining();
  EXPECT_EQ(generate_status(text_request("hello", 4)).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::ClientContext ctx;
  auto reader = h_->stub->GenerateStream(&ctx, text_request("hello", 4));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace flashserve::test
