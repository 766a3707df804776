// The official OpenAI Python client (pinned in the venv scripts/setup.sh makes) against the real
// binary serving SmolLM2: completions and chat, streaming and not.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

TEST(OpenAiSdk, CompletionsAndChatStreamingAndNot) {
  ASSERT_TRUE(std::filesystem::exists(FLASHSERVE_VENV_PYTHON)) << "run scripts/setup.sh to create the venv";
  test::ServerProcess server(test::real_model_path());
  const std::string cmd = std::string(FLASHSERVE_VENV_PYTHON) + " " + FLASHSERVE_SOURCE_DIR +
                          "/tests/server/openai_client_test.py http://127.0.0.1:" + std::to_string(server.http_port()) +
                          "/v1 SmolLM2-135M-Instruct.Q4_1 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  std::printf("%s\n", out.c_str());
  EXPECT_EQ(status, 0) << out << "\nserver log:\n" << server.log();
}

}  // namespace
}  // namespace flashserve
