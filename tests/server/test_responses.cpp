// The OpenAI Responses API without the SDK: the request read into a chat request (input items,
// instructions, tools, text.format, refusals), the writer's output items and numbered events, the
// bounded store behind previous_response_id, and the routes over HTTP on the tiny random model.
#include <gtest/gtest.h>

#include "server/responses_request.h"
#include "server/responses_writer.h"
#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

using ojson = flashserve::json;

const Serving& tiny_serving() {
  static Serving serving(tiny_model(), "test-model", test_engine_options(), nullptr);
  return serving;
}

ResponsesRequest parse(const std::string& body, ResponseStore& store) {
  return parse_responses_request(ojson::parse(body), tiny_serving(), store);
}

// The 400's param, or "accepted".
std::string refusal_param(const std::string& body) {
  ResponseStore store(4, 1 << 20);
  try {
    parse(body, store);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.param;
  }
  return "accepted";
}

RequestOutput text_event(const std::string& text, int32_t num_output_tokens,
                         std::optional<FinishReason> finish = std::nullopt) {
  RequestOutput o;
  o.text = text;
  o.num_output_tokens = num_output_tokens;
  o.num_cached_tokens = 2;
  o.finish = finish;
  return o;
}

// (event name, data) of a Responses stream.
std::vector<std::pair<std::string, json>> named_events(const std::string& body) {
  std::vector<std::pair<std::string, json>> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    const size_t eol = body.find('\n', pos);
    const size_t end = body.find("\n\n", eol);
    out.emplace_back(body.substr(pos + 7, eol - pos - 7), json::parse(body.substr(eol + 7, end - eol - 7)));
    pos = end;
  }
  return out;
}

TEST(ResponsesRequest, InstructionsAndInputItemsBecomeChatMessages) {
  ResponseStore store(4, 1 << 20);
  const ResponsesRequest r = parse(R"({"instructions": "Be brief.", "max_output_tokens": 7, "input": [
      {"role": "developer", "content": "Use metric units."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                      {"type": "input_text", "text": "in Paris?"}]},
      {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
      {"type": "function_call", "call_id": "call_2", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_1", "output": "18 C"}]})", store);
  const ojson expected = ojson::parse(R"([
      {"role": "system", "content": "Use metric units."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}])");
  EXPECT_EQ(r.conversation, expected);  // the instructions are not part of what is kept
  EXPECT_EQ(r.generation.max_tokens, 7);
  EXPECT_EQ(r.generation.endpoint, Endpoint::Chat);
  ojson with_instructions = expected;
  with_instructions.insert(with_instructions.begin(), ojson{{"role", "system"}, {"content", "Be brief."}});
  EXPECT_EQ(r.generation.prompts[0], chat_prompt_ids(with_instructions, tiny_serving()));
  EXPECT_TRUE(r.store);  // OpenAI's default, with a store
  EXPECT_EQ(r.echo["instructions"], "Be brief.");
  EXPECT_EQ(r.echo["max_output_tokens"], 7);
}

TEST(ResponsesRequest, ToolsToolChoiceAndFormatTakeTheChatPath) {
  ResponseStore store(4, 1 << 20);
  const ResponsesRequest r = parse(R"({"input": "hi", "tool_choice": {"type": "function", "name": "reset"},
      "tools": [{"type": "function", "name": "reset", "parameters": {"type": "object", "properties": {}}}]})", store);
  ASSERT_TRUE(r.generation.tools);
  EXPECT_EQ(r.generation.tools->choice, ToolChoice::Named);
  EXPECT_EQ(r.generation.tools->forced_name, "reset");
  EXPECT_TRUE(r.generation.params.grammar);  // the forced call
  EXPECT_EQ(r.echo["tools"][0]["name"], "reset");  // echoed in the Responses shape

  const ResponsesRequest f = parse(R"({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x",
      "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}}})", store);
  EXPECT_TRUE(f.generation.params.grammar);
  EXPECT_EQ(f.echo["text"]["format"]["name"], "x");
}

TEST(ResponsesRequest, UnsupportedFieldsAreRefusedByName) {
  EXPECT_EQ(refusal_param(R"({"input": "hi"})"), "accepted");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "reasoning": {"effort": null}, "include": [], "truncation": "disabled",
      "background": false, "top_logprobs": 0, "prompt_cache_key": "k", "safety_identifier": "s",
      "metadata": {"a": "b"}, "stream_options": {"include_obfuscation": false}})"), "accepted");
  EXPECT_EQ(refusal_param(R"({})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "conversation": "c"})"), "conversation");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "reasoning": {"effort": "low"}})"), "reasoning");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "include": ["reasoning.encrypted_content"]})"), "include");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "truncation": "auto"})"), "truncation");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "max_tool_calls": 2})"), "max_tool_calls");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "stream_options": {"include_obfuscation": true}})"), "stream_options");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "max_output_tokens": "5"})"), "max_output_tokens");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "temperature": 2.5})"), "temperature");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "tools": [{"type": "web_search"}]})"), "tools");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "tools": [{"type": "function", "name": "f", "extra": 1}]})"), "tools");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "tool_choice": {"type": "file_search"}})"), "tool_choice");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "text": {"format": {"type": "json_schema", "schema": 1}}})"), "text.format");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "text": {"format": {"type": "grammar"}}})"), "text.format");
  EXPECT_EQ(refusal_param(R"({"input": [{"type": "item_reference", "id": "x"}]})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": [{"role": "tool", "content": "x"}]})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": []})"), "input");
  EXPECT_EQ(refusal_param(R"({"input": "hi", "previous_response_id": "resp_none"})"), "previous_response_id");
}

TEST(ResponsesRequest, AStoreThatIsOffRefusesStoringAndContinuing) {
  ResponseStore off(0, 1 << 20);
  EXPECT_FALSE(parse(R"({"input": "hi"})", off).store);
  EXPECT_FALSE(parse(R"({"input": "hi", "store": false})", off).store);
  for (const char* body : {R"({"input": "hi", "store": true})", R"({"input": "hi", "previous_response_id": "r"})"}) {
    try {
      parse(body, off);
      ADD_FAILURE() << body << " was accepted";
    } catch (const ApiError& e) {
      EXPECT_EQ(e.code, "unsupported_parameter");
      EXPECT_NE(std::string(e.what()).find("--max-stored-responses"), std::string::npos) << e.what();
    }
  }
}

TEST(ResponsesRequest, PreviousResponseIdContinuesTheStoredConversation) {
  ResponseStore store(4, 1 << 20);
  store.put("resp_a", {ojson::parse(R"([{"role": "user", "content": "I am Ada."},
                                        {"role": "assistant", "content": "Hello Ada."}])"),
                       ojson::object()});
  const ResponsesRequest r = parse(R"({"previous_response_id": "resp_a", "input": "Who am I?"})", store);
  ASSERT_EQ(r.conversation.size(), 3u);
  EXPECT_EQ(r.conversation[0]["content"], "I am Ada.");
  EXPECT_EQ(r.conversation[2]["content"], "Who am I?");
  EXPECT_EQ(r.echo["previous_response_id"], "resp_a");
}

TEST(ResponseStore, KeepsTheMostRecentlyUsedWithinCountAndBytes) {
  ResponseStore store(2, 1 << 20);
  store.put("a", {ojson::array(), ojson::object()});
  store.put("b", {ojson::array(), ojson::object()});
  ASSERT_TRUE(store.get("a"));  // now "b" is the least recently used
  store.put("c", {ojson::array(), ojson::object()});
  EXPECT_EQ(store.size(), 2u);
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.erase("c"));
  EXPECT_FALSE(store.erase("c"));

  ResponseStore small(100, 300);
  const ojson big = ojson::array({{{"role", "user"}, {"content", std::string(200, 'x')}}});
  small.put("x", {big, ojson::object()});
  small.put("y", {big, ojson::object()});  // both do not fit: x goes
  EXPECT_FALSE(small.get("x"));
  EXPECT_TRUE(small.get("y"));
  EXPECT_LE(small.bytes(), 300u);
  small.put("z", {ojson::array({{{"content", std::string(400, 'x')}}}), ojson::object()});  // bigger than the budget
  EXPECT_FALSE(small.get("z"));
  EXPECT_TRUE(small.get("y"));
}

GenerationRequest chat_request(bool stream, std::optional<ToolCalling> tools = std::nullopt) {
  GenerationRequest r;
  r.endpoint = Endpoint::Chat;
  r.prompts = {{1, 2, 3, 4}};
  r.stream = stream;
  r.tools = std::move(tools);
  return r;
}

ToolCalling reset_tool() {
  ToolCalling t;
  t.names = {"reset"};
  return t;
}

TEST(ResponsesWriter, StreamsNumberedEventsForTextThenACall) {
  const GenerationRequest r = chat_request(true, reset_tool());
  ResponseStore store(4, 1 << 20);
  ResponsesWriter w(r, {{"model", "m"}}, ojson::array({{{"role", "user"}, {"content", "q"}}}), &store);
  std::string body = w.add({{0, text_event("\n Hi", 1)}});
  body += w.add({{0, text_event(" there.\n<tool_call>\n{\"name\": \"reset\", \"arguments\": {\"hard\"", 2)}});
  body += w.add({{0, text_event(": true}}\n</tool_call>", 3, FinishReason::Stop)}});
  body += w.finish();
  const auto events = named_events(body);
  std::vector<std::string> names;
  for (size_t i = 0; i < events.size(); ++i) {
    names.push_back(events[i].first);
    EXPECT_EQ(events[i].second["type"], events[i].first);
    EXPECT_EQ(events[i].second["sequence_number"], i);
  }
  const std::vector<std::string> expected = {
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
      "response.content_part.done", "response.output_item.done", "response.output_item.added",
      "response.function_call_arguments.delta", "response.function_call_arguments.delta",
      "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
  EXPECT_EQ(names, expected);
  const json& done = events.back().second["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["model"], "m");
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["content"][0]["text"], "\n Hi there.");
  const json& call = done["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "reset");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json::parse(R"({"hard": true})"));
  EXPECT_EQ(done["usage"]["output_tokens"], 3);
  EXPECT_EQ(done["usage"]["input_tokens"], 4);
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 2);
  // Kept for a later turn: the question, then the answer with its call.
  const std::optional<StoredResponse> kept = store.get(w.id());
  ASSERT_TRUE(kept);
  ASSERT_EQ(kept->conversation.size(), 2u);
  EXPECT_EQ(kept->conversation[1]["content"], "\n Hi there.");
  EXPECT_EQ(kept->conversation[1]["tool_calls"][0]["id"], call["call_id"]);
  EXPECT_EQ(json::parse(kept->response.dump()), done);
}

TEST(ResponsesWriter, AWholeResponseOnlyCallingHasNoMessageAndIsNotStoredWithoutAsking) {
  const GenerationRequest r = chat_request(false, reset_tool());
  ResponsesWriter w(r, ojson::object(), ojson::array(), nullptr);
  EXPECT_EQ(w.add({{0, text_event("\n<tool_call>\n{\"name\": \"reset\", \"arguments\": {}}\n</tool_call>", 5,
                                  FinishReason::Stop)}}),
            "");
  const json body = json::parse(w.finish());
  ASSERT_EQ(body["output"].size(), 1u) << body;
  EXPECT_EQ(body["output"][0]["type"], "function_call");
  EXPECT_EQ(body["output"][0]["arguments"], "{}");
  EXPECT_EQ(body["status"], "completed");
}

TEST(ResponsesWriter, MaxOutputTokensMakesItIncompleteAndAnEmptyAnswerIsStillAMessage) {
  const GenerationRequest r = chat_request(false);
  ResponsesWriter cut(r, ojson::object(), ojson::array(), nullptr);
  cut.add({{0, text_event("Par", 1, FinishReason::Length)}});
  const json body = json::parse(cut.finish());
  EXPECT_EQ(body["status"], "incomplete");
  EXPECT_EQ(body["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(body["output"][0]["status"], "incomplete");

  ResponsesWriter empty(r, ojson::object(), ojson::array(), nullptr);
  empty.add({{0, text_event("", 1, FinishReason::Stop)}});
  const json e = json::parse(empty.finish());
  ASSERT_EQ(e["output"].size(), 1u);
  EXPECT_EQ(e["output"][0]["content"][0]["text"], "");
}

TEST(ResponsesWriter, AServerAbortEndsTheStreamWithResponseFailed) {
  const GenerationRequest r = chat_request(true);
  ResponseStore store(4, 1 << 20);
  ResponsesWriter w(r, ojson::object(), ojson::array(), &store);
  w.add({{0, text_event("Hi", 1)}});
  RequestOutput abort;
  abort.finish = FinishReason::Abort;
  abort.error = RequestError{ErrorKind::Unavailable, "the server is shutting down"};
  const auto events = named_events(w.add({{0, abort}}));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().first, "response.failed");
  EXPECT_EQ(events.back().second["response"]["status"], "failed");
  EXPECT_EQ(events.back().second["response"]["error"]["message"], "the server is shutting down");
  ASSERT_TRUE(w.failure());
  EXPECT_EQ(w.finish(), "");
  EXPECT_EQ(store.size(), 0u);  // a failed response is not kept
}

// Enum parameters only: a random model cannot wander off into an endless string.
const json kResetTool = json::parse(R"({"type": "function", "name": "set_mode", "parameters": {"type": "object",
    "properties": {"mode": {"enum": ["fast", "slow"]}}, "required": ["mode"], "additionalProperties": false}})");

TEST(ResponsesHttp, CreateContinueRetrieveAndDelete) {
  TinyModelSpec spec = tiny_spec_for_server();
  spec.context_len = 2048;
  const std::unique_ptr<Model> model = load_tiny_model(spec, "responses");
  HttpOptions options = test_http_options();
  options.api_key = ApiKey("sekret");
  HttpHarness h(*model, test_engine_options(8 << 20), options);
  const httplib::Headers auth = {{"Authorization", "Bearer sekret"}};

  EXPECT_EQ(post(h, "/v1/responses", json{{"input", "hi"}}).status, 401);
  const Reply first = post(h, "/v1/responses",
                           json{{"input", "switch to fast mode"}, {"tools", {kResetTool}}, {"tool_choice", "required"},
                                {"parallel_tool_calls", false}, {"temperature", 0.8}, {"seed", 3}},
                           auth);
  ASSERT_EQ(first.status, 200) << first.text;
  ASSERT_EQ(first.body["output"].back()["type"], "function_call") << first.text;
  const json args = json::parse(first.body["output"].back()["arguments"].get<std::string>());
  EXPECT_TRUE(args["mode"] == "fast" || args["mode"] == "slow") << args;

  const std::string id = first.body["id"];
  const Reply next = post(h, "/v1/responses",
                          json{{"previous_response_id", id},
                               {"max_output_tokens", 4},
                               {"tools", {kResetTool}},  // tools are offered per request, as on OpenAI
                               {"input", {{{"type", "function_call_output"},
                                           {"call_id", first.body["output"].back()["call_id"]},
                                           {"output", "done"}}}}},
                          auth);
  ASSERT_EQ(next.status, 200) << next.text;
  EXPECT_GT(next.body["usage"]["input_tokens"], first.body["usage"]["input_tokens"]);
  EXPECT_GT(next.body["usage"]["input_tokens_details"]["cached_tokens"], 0) << next.text;

  EXPECT_EQ(get(h, "/v1/responses/" + id, auth).body, first.body);
  auto c = h.client();
  const Reply deleted = to_reply(c.Delete(("/v1/responses/" + id).c_str(), auth));
  EXPECT_EQ(deleted.status, 200);
  EXPECT_EQ(deleted.body["deleted"], true);
  EXPECT_EQ(get(h, "/v1/responses/" + id, auth).status, 404);
  EXPECT_EQ(to_reply(c.Delete(("/v1/responses/" + id).c_str(), auth)).status, 404);
  EXPECT_EQ(get(h, "/v1/responses", auth).status, 405);

  // Streamed: the events end with response.completed (or incomplete) and the stream's framing is SSE.
  const Reply streamed = post(h, "/v1/responses", json{{"input", "hi"}, {"stream", true}, {"max_output_tokens", 3}}, auth);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.content_type, "text/event-stream");
  const auto events = named_events(streamed.text);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().first, "response.created");
  EXPECT_EQ(events.back().first, "response.incomplete");
  EXPECT_TRUE(all_blocks_free(h.serving));
}

}  // namespace
}  // namespace flashserve::test
