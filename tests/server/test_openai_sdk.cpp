// The official OpenAI and Anthropic Python clients (pinned in the venv scripts/setup.sh makes)
// against the real binary serving SmolLM2: completions and chat, streaming and not; structured
// outputs; tool calling; the Responses API; Anthropic's Messages API.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

// Runs a script of tests/server/ against `server`; returns its exit status and prints its transcript.
int run_client(const test::ServerProcess& server, const std::string& mode, std::string& out,
               const std::string& script = "openai_client_test.py") {
  const std::string cmd = std::string(FLASHSERVE_VENV_PYTHON) + " " + FLASHSERVE_SOURCE_DIR +
                          "/tests/server/" + script + " " + mode + " http://127.0.0.1:" +
                          std::to_string(server.http_port()) + "/v1 SmolLM2-135M-Instruct.Q4_1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  std::printf("%s\n", out.c_str());
  return status;
}

TEST(OpenAiSdk, CompletionsAndChatStreamingAndNot) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  std::string out;
  EXPECT_EQ(run_client(server, "", out), 0) << out << "\nserver log:\n" << server.log();
}

TEST(OpenAiSdk, OverloadGives429WithRetryAfter) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path(),
                             {"--max-num-seqs", "1", "--max-waiting", "1", "--max-queue-time", "0.5"});
  std::string out;
  EXPECT_EQ(run_client(server, "--overload", out), 0) << out << "\nserver log:\n" << server.log();
}

// response_format (json_object, json_schema and the SDK's parse() with pydantic models), regex and
// GBNF, validated with jsonschema over seeds and temperatures (tests/server/structured_output_test.py).
TEST(OpenAiSdk, StructuredOutputs) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  std::string out;
  EXPECT_EQ(run_client(server, "", out, "structured_output_test.py"), 0) << out << "\nserver log:\n" << server.log();
}

// tools + tool_choice (required, named, auto, none), parallel_tool_calls, streamed tool-call deltas,
// parse()/stream() with pydantic_function_tool and a whole round trip
// (tests/server/tool_calling_test.py).
TEST(OpenAiSdk, ToolCalling) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  std::string out;
  EXPECT_EQ(run_client(server, "", out, "tool_calling_test.py"), 0) << out << "\nserver log:\n" << server.log();
}

// The Responses API: create, stream, parse, function calls and their outputs, previous_response_id,
// retrieve and delete, refusals (tests/server/responses_test.py).
TEST(OpenAiSdk, ResponsesApi) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  std::string out;
  EXPECT_EQ(run_client(server, "", out, "responses_test.py"), 0) << out << "\nserver log:\n" << server.log();
}

// messages.create / stream (equal at temperature 0), stop_sequences, tool_use with a forced tool
// and a tool_result round trip, count_tokens, typed errors (tests/server/anthropic_client_test.py).
TEST(AnthropicSdk, Messages) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  std::string out;
  EXPECT_EQ(run_client(server, "", out, "anthropic_client_test.py"), 0) << out << "\nserver log:\n" << server.log();
}

// The key as x-api-key and as the SDK sends it; a wrong one is an AuthenticationError.
TEST(AnthropicSdk, ApiKey) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path(), {"--api-key", "k3y-for-anthropic"});
  std::string out;
  EXPECT_EQ(run_client(server, "--key k3y-for-anthropic", out, "anthropic_client_test.py"), 0)
      << out << "\nserver log:\n" << server.log();
}

}  // namespace
}  // namespace flashserve
