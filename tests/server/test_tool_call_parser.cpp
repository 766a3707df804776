// The tool-call reader (server/tool_call_parser.h): whatever way the output is cut into pieces,
// the same content and calls come out; nothing the model wrote is lost.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "server/tool_call_parser.h"

namespace flashserve {
namespace {

struct Call {
  std::string name, arguments;
  bool operator==(const Call&) const = default;
};

struct Result {
  std::string content;
  std::vector<Call> calls;
  int32_t deltas = 0;  // how many call deltas arrived
};

void collect(Result& r, const ParsedOutput& p) {
  r.content += p.content;
  for (const ToolCallDelta& d : p.calls) {
    ++r.deltas;
    if (d.first) {
      EXPECT_EQ(d.index, int32_t(r.calls.size()));
      r.calls.push_back({d.name, ""});
    } else {
      ASSERT_EQ(d.index, int32_t(r.calls.size()) - 1) << "arguments for a call that is not the last";
      EXPECT_TRUE(d.name.empty());
    }
    r.calls.back().arguments += d.arguments;
  }
}

const std::vector<std::string> kNames = {"get_weather", "add"};

// The output fed in pieces of `sizes` (cycled), then finished.
Result parse(const std::string& text, const std::vector<size_t>& sizes) {
  ToolCallParser parser(kNames);
  Result r;
  for (size_t pos = 0, i = 0; pos < text.size(); ++i) {
    const size_t n = std::min(sizes[i % sizes.size()], text.size() - pos);
    collect(r, parser.feed(std::string_view(text).substr(pos, n)));
    pos += n;
  }
  collect(r, parser.finish());
  return r;
}

// Whole, one byte at a time, and in random pieces: always the same result.
Result parse_every_way(const std::string& text) {
  const Result whole = parse(text, {text.size() + 1});
  const Result bytes = parse(text, {1});
  EXPECT_EQ(bytes.content, whole.content) << text;
  EXPECT_EQ(bytes.calls, whole.calls) << text;
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<size_t> sizes;
    for (int i = 0; i < 8; ++i) sizes.push_back(1 + rng() % 9);
    const Result r = parse(text, sizes);
    EXPECT_EQ(r.content, whole.content) << text;
    EXPECT_EQ(r.calls, whole.calls) << text;
  }
  return whole;
}

TEST(ToolCallParser, PlainTextPassesThroughUnchanged) {
  for (const std::string text : {"Hello, world.", "  spaced out  \n", "a < b and <tool is not a tag", "<tool_cal",
                                 "ends with <", ""}) {
    const Result r = parse_every_way(text);
    EXPECT_EQ(r.content, text);
    EXPECT_TRUE(r.calls.empty());
  }
}

TEST(ToolCallParser, OneCall) {
  const Result r =
      parse_every_way("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
  EXPECT_EQ(r.content, "");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (Call{"get_weather", "{\"city\": \"Paris\"}"}));
}

TEST(ToolCallParser, ArgumentsStreamAsTheyArrive) {
  const Result r = parse("<tool_call>{\"name\":\"add\",\"arguments\":{\"a\": 1, \"b\": 2}}</tool_call>", {1});
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{\"a\": 1, \"b\": 2}");
  EXPECT_EQ(r.deltas, int32_t(r.calls[0].arguments.size()));  // one delta per byte fed
}

TEST(ToolCallParser, ContentThenParallelCalls) {
  const Result r = parse_every_way(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": {\"nested\": [\"}\", \"\\\"}\"]}}}\n"
      "</tool_call>\n");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0], (Call{"get_weather", "{\"city\": \"Rome\"}"}));
  // Braces inside strings do not end the arguments.
  EXPECT_EQ(r.calls[1], (Call{"add", "{\"a\": 1, \"b\": {\"nested\": [\"}\", \"\\\"}\"]}}"}));
}

TEST(ToolCallParser, TextAfterCallsIsContent) {
  const Result r =
      parse_every_way("<tool_call>{\"name\": \"add\", \"arguments\": {}}</tool_call>\nDone, see above.  ");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, "{}");
  EXPECT_EQ(r.content, "\nDone, see above.");
}

TEST(ToolCallParser, BlocksThatAreNotCallsAreGivenBack) {
  for (const std::string text : {
           "Hi <tool_call>not json</tool_call> there",
           "<tool_call>{\"name\": \"unknown_fn\", \"arguments\": {}}</tool_call>",
           "x\n<tool_call>{\"name\": \"add\", \"arguments\": [1, 2]}</tool_call>",
           "<tool_call>{\"name\": \"add\"}</tool_call>",
           "<tool_call>{\"name\": \"add\", \"argu",  // cut off before the arguments began
       }) {
    const Result r = parse_every_way(text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCallParser, OtherKeyOrderAndStringArgumentsAreReadWhole) {
  const Result r = parse_every_way(
      "<tool_call>{\"arguments\": {\"a\": 2}, \"name\": \"add\"}</tool_call>"
      "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}</tool_call>");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0], (Call{"add", "{\"a\":2}"}));
  EXPECT_EQ(r.calls[1], (Call{"get_weather", "{\"city\": \"Oslo\"}"}));
  EXPECT_EQ(r.content, "");
}

TEST(ToolCallParser, CallsCutOffStayCalls) {
  // Stopped at </tool_call> (a stop string: not in the output) or at max_tokens mid-arguments.
  Result r = parse_every_way("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (Call{"add", "{\"a\": 1}"}));
  r = parse_every_way("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (Call{"add", "{\"a\": 1"}));
  // Unannounced (other key order) and complete: parsed at the end.
  r = parse_every_way("<tool_call>{\"arguments\": {}, \"name\": \"add\"}");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (Call{"add", "{}"}));
}

TEST(ToolCallParser, WhatFollowsStreamedArgumentsInTheBlockIsDropped) {
  // Announced before the stray key could be seen: the call stands, the rest of its block goes.
  const Result r = parse_every_way("<tool_call>{\"name\": \"add\", \"arguments\": {}, \"extra\": 1}</tool_call>ok");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0], (Call{"add", "{}"}));
  EXPECT_EQ(r.content, "ok");
}

TEST(ToolCallParser, EscapedNamesAreDecoded) {
  ToolCallParser parser({"a\"b"});
  const ParsedOutput p = parser.feed("<tool_call>{\"name\": \"a\\\"b\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "a\"b");
}

// A model can write anything, nesting included: a call nested far too deep to be JSON we read is
// given back as text, whole, instead of overflowing the stack.
TEST(ToolCallParser, NestingTooDeepIsGivenBackAsText) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const std::string& block : {"{\"name\": \"add\", \"arguments\": " + deep + "}",
                                   "{\"arguments\": " + deep + ", \"name\": \"add\"}",
                                   "{\"arguments\": \"" + deep + "\", \"name\": \"add\"}"}) {
    const std::string text = "<tool_call>" + block + "</tool_call>";
    const Result r = parse(text, {4096});
    EXPECT_TRUE(r.calls.empty());
    EXPECT_EQ(r.content, text);
  }
}

}  // namespace
}  // namespace flashserve
