// The real binary's lifecycle: startup, readiness, a graceful SIGTERM that lets in-flight requests
// finish, refuses new ones and exits 0, and what clients see of requests still running after the
// grace period. Also: a log pipe nobody reads does not stall generation.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "flashserve.grpc.pb.h"
#include "tests/util/patient_client.h"
#include "tests/server/grpc_harness.h"
#include "tests/server/http_harness.h"
#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace pb = ::flashserve::v1;

TEST(ServeLifecycle, SigtermDrainsInFlightRequestsThenExitsCleanly) {
  test::ServerProcess server(test::real_model_path(), {"--grace-period", "30"});
  httplib::Client client = test::patient_client(server.http_port());
  ASSERT_EQ(client.Get("/ready")->status, 200);

  // ~100 tokens on SmolLM2 take over a second on CPU: long enough to be in flight at SIGTERM.
  auto in_flight = std::async(std::launch::async, [&] {
    httplib::Client c = test::patient_client(server.http_port());
    const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 100}, {"ignore_eos", true}, {"temperature", 0}};
    return c.Post("/v1/completions", body.dump(), "application/json");
  });
  // SIGTERM only once the engine runs it: on a loaded machine the request can take seconds to get
  // there, and a request the server has not accepted yet is rightly refused while draining.
  bool running = false;
  for (int i = 0; i < 6000 && !running; ++i) {
    auto m = client.Get("/metrics");
    running = m && m->body.find("num_requests_running{model_name=\"SmolLM2-135M-Instruct.Q4_1\"} 1") != std::string::npos;
    if (!running) std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(running) << "the request never started:\n" << server.log();
  kill(server.pid(), SIGTERM);
  std::this_thread::sleep_for(200ms);

  const auto ready = client.Get("/ready");
  if (ready) {
    EXPECT_EQ(ready->status, 503) << "still ready while draining";
  }
  const auto refused = client.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
  if (refused) {
    EXPECT_EQ(refused->status, 503) << refused->body;
  }

  const auto done = in_flight.get();
  ASSERT_TRUE(done) << "in-flight request lost at shutdown:\n" << server.log();
  EXPECT_EQ(done->status, 200) << done->body << "\n" << server.log();
  EXPECT_EQ(json::parse(done->body)["usage"]["completion_tokens"], 100);
  EXPECT_EQ(server.stop(), 0) << server.log();
  EXPECT_NE(server.log().find("request req-0 finished: reason=length"), std::string::npos) << server.log();
}

// A KV cache smaller than the context window: a chat request without max_tokens may fill the
// cache, not the window, and must not be refused as too long.
TEST(ServeLifecycle, DefaultMaxTokensFitsASmallKvCache) {
  // 10 f16 blocks, 160 tokens
  test::ServerProcess server(test::tiny_model_for_server(), {"--kv-cache-bytes", "81920"});
  httplib::Client client = test::patient_client(server.http_port());
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], 160);
  const auto res = client.Post("/v1/chat/completions",
                               R"({"messages": [{"role": "user", "content": "hello"}], "ignore_eos": true})",
                               "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  const json usage = json::parse(res->body)["usage"];
  EXPECT_EQ(usage["total_tokens"], 160);
}

// Past the grace period, a stream still running ends with a final event before the listeners
// close: a chunk with finish_reason "abort", an error event, then [DONE] (it used to be cut
// mid-body); a non-streamed request gets 503; a gRPC stream ends with UNAVAILABLE.
TEST(ServeLifecycle, StreamsPastTheGracePeriodEndWithAFinalEvent) {
  test::ServerProcess server(test::real_model_path(), {"--grace-period", "1"});
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 3000}, {"ignore_eos", true}, {"stream", true}}.dump();
  test::RawConnection stream(server.http_port(), "/v1/completions", body);
  stream.read_until("\"text\":", 2);
  auto plain = std::async(std::launch::async, [&] {
    httplib::Client c = test::patient_client(server.http_port());
    return c.Post("/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 3000}, {"ignore_eos", true}}.dump(),
                  "application/json");
  });
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = pb::Generation::NewStub(channel);
  grpc::ClientContext ctx;
  auto reader = stub->GenerateStream(&ctx, test::text_request("Once upon a time", 3000));
  pb::GenerateStreamResponse msg;
  ASSERT_TRUE(reader->Read(&msg));
  std::this_thread::sleep_for(200ms);  // the non-streamed request is in too

  const auto t0 = Clock::now();
  kill(server.pid(), SIGTERM);
  const std::string tail = stream.read_until("0\r\n\r\n");  // the terminating chunk
  const double ended_after = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<json> events = test::sse_events(tail.substr(tail.find("\r\n\r\n")));
  ASSERT_GE(events.size(), 3u) << tail.substr(tail.size() > 2000 ? tail.size() - 2000 : 0);
  EXPECT_EQ(events.back(), "[DONE]");
  const json& error = events[events.size() - 2];
  EXPECT_EQ(error["error"]["code"], "service_unavailable") << error;
  EXPECT_EQ(events[events.size() - 3]["choices"][0]["finish_reason"], "abort");
  EXPECT_LT(ended_after, 5.0);

  const auto refused = plain.get();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503) << refused->body;
  while (reader->Read(&msg)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Log lines go through an asynchronous, dropping queue: with stderr a pipe that nobody reads
// (full after a few hundred lines), requests keep completing. The engine thread used to write the
// finish line itself and block on the full pipe, stalling everyone.
TEST(ServeLifecycle, StalledLogPipeDoesNotStallGeneration) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  test::ServerProcess server(test::tiny_model_for_server(), {}, pipe_fds[1]);
  close(pipe_fds[1]);
  httplib::Client client = test::patient_client(server.http_port());
  const auto t0 = Clock::now();
  int ok = 0;
  for (int i = 0; i < 800; ++i) {
    const auto r = client.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})", "application/json");
    ok += r && r->status == 200;
  }
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("800 requests with a stalled log pipe: %d answered in %.2f s\n", ok, took);
  EXPECT_EQ(ok, 800);
  EXPECT_LT(took, 60.0);
  close(pipe_fds[0]);
}

TEST(ServeLifecycle, CorruptModelFailsWithAReadableMessage) {
  const std::string path = (std::filesystem::temp_directory_path() / "flashserve-corrupt.gguf").string();
  std::ofstream(path) << "GGUF this is not a model";
  const test::ExitResult r = test::run_to_exit({"serve", "--model", path, "--port", std::to_string(test::free_port())});
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_NE(r.log.find(path), std::string::npos) << r.log;  // the message names the file and the problem
}

// Without a GPU (as in CI), asking for one is a one-line error and exit status 1, never a crash;
// with one (or the emulated one, cuda_emu/), the same command runs on it. `generate` builds its
// runner as `serve` does, and exits.
TEST(ServeLifecycle, DeviceCudaRunsOnAGpuOrFailsClearly) {
  const std::string model = test::tiny_model_for_server();
  const test::ExitResult r =
      test::run_to_exit({"generate", "--model", model, "--device", "cuda", "--prompt", "hi", "--max-tokens", "2"});
  if (r.log.find("device: cuda") != std::string::npos) {
    EXPECT_EQ(r.status, 0) << r.log;
    EXPECT_NE(r.log.find("generated: 2 tokens"), std::string::npos) << r.log;
    const test::ExitResult fp8 = test::run_to_exit({"generate", "--model", model, "--device", "cuda", "--kv-cache-dtype",
                                                    "fp8", "--prompt", "hi", "--max-tokens", "2"});
    EXPECT_EQ(fp8.status, 0) << fp8.log;
    EXPECT_NE(fp8.log.find("KV cache F8_E4M3"), std::string::npos) << fp8.log;
    EXPECT_NE(fp8.log.find("generated: 2 tokens"), std::string::npos) << fp8.log;
    return;
  }
  EXPECT_EQ(r.status, 1) << r.log;
  const bool says_why = r.log.find("no CUDA device") != std::string::npos || r.log.find("no CUDA backend") != std::string::npos;
  EXPECT_TRUE(says_why) << r.log;
}

// The CPU keeps its KV cache in f16 by default (the test above), f32, which holds half the tokens
// in the same bytes, q8_0, which holds 32/17 times as many (34 bytes for 32 values), or fp8, twice
// as many; bf16 is a GPU type and is refused by name.
TEST(ServeLifecycle, KvCacheDtypeOnTheCpu) {
  const test::ExitResult refused = test::run_to_exit({"serve", "--model", test::tiny_model_for_server(), "--device", "cpu",
                                                      "--kv-cache-dtype", "bf16", "--port", std::to_string(test::free_port())});
  EXPECT_EQ(refused.status, 1) << refused.log;
  EXPECT_NE(refused.log.find("--kv-cache-dtype must be f16, f32, q8_0 or fp8 on the CPU, not 'bf16'"), std::string::npos)
      << refused.log;
  // 2 layers x K and V x 16 tokens x one 64-wide head: 8,192 bytes a block in f16, 4,352 in q8_0,
  // 4,096 in fp8; each budget holds 10 blocks, where f16 would hold 5 (80 tokens).
  for (const auto& [flag, name, bytes] : {std::tuple{"q8_0", "Q8_0", "43520"}, std::tuple{"fp8", "F8_E4M3", "40960"}}) {
    SCOPED_TRACE(flag);
    test::ServerProcess eight_bit(test::tiny_model_for_server(),
                                  {"--device", "cpu", "--kv-cache-dtype", flag, "--kv-cache-bytes", bytes});
    httplib::Client client = test::patient_client(eight_bit.http_port());
    const auto models = client.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], 160);
    EXPECT_NE(eight_bit.log().find(std::string("KV cache ") + name), std::string::npos) << eight_bit.log();
    const auto done = client.Post("/v1/completions", R"({"prompt": "hello there", "max_tokens": 20})", "application/json");
    ASSERT_TRUE(done);
    EXPECT_EQ(done->status, 200) << done->body;
  }

  test::ServerProcess server(test::tiny_model_for_server(),
                             {"--device", "cpu", "--kv-cache-dtype", "f32", "--kv-cache-bytes", "81920"});  // 5 blocks
  httplib::Client client = test::patient_client(server.http_port());
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], 80);
  EXPECT_NE(server.log().find("KV cache F32"), std::string::npos) << server.log();
}

// generate's stdout is the answer alone: every log line goes to stderr, so `> answer.txt` works;
// serve writes nothing to stdout either.
TEST(ServeLifecycle, GenerateWritesTheAnswerAloneToStdout) {
  const test::ExitResult r =
      test::run_to_exit({"generate", "--model", test::tiny_model_for_server(), "--prompt", "hi", "--max-tokens", "3"});
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_GT(r.out.size(), 1u) << "no answer on stdout";
  for (const char* log_line : {"CPU kernels:", "KV cache", "device:", "[info]", "generated:"}) {
    EXPECT_EQ(r.out.find(log_line), std::string::npos) << log_line << " on stdout: " << r.out;
    EXPECT_NE(r.log.find(log_line), std::string::npos) << log_line << " missing from stderr: " << r.log;
  }
  // serve too: a start refused after its first log lines leaves stdout empty.
  const test::ExitResult serve = test::run_to_exit(
      {"serve", "--model", test::tiny_model_for_server(), "--device", "cpu", "--kv-cache-dtype", "bf16", "--port", "0"});
  EXPECT_EQ(serve.status, 1) << serve.log;
  EXPECT_NE(serve.log.find("CPU kernels:"), std::string::npos) << serve.log;
  EXPECT_EQ(serve.out, "");
}

// --chat-template replaces the model's template: a broken file stops the start with its position,
// a working one is what the prompt is rendered with.
TEST(ServeLifecycle, ChatTemplateFileIsUsedOrRefused) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string bad = (dir / "flashserve-bad.jinja").string(), good = (dir / "flashserve-good.jinja").string();
  std::ofstream(bad) << "{% for m in messages %}{{ m.content }";
  std::ofstream(good) << "{% for m in messages %}[{{ m.role }}] {{ m.content | upper }}\n{% endfor %}";
  const test::ExitResult refused = test::run_to_exit(
      {"generate", "--model", test::tiny_model_for_server(), "--chat", "--chat-template", bad, "--prompt", "hi", "--max-tokens", "1"});
  EXPECT_EQ(refused.status, 1) << refused.log;
  EXPECT_NE(refused.log.find("line 1"), std::string::npos) << refused.log;

  const auto prompt_tokens = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"generate", "--model", test::tiny_model_for_server(), "--chat", "--prompt", "hello",
                                     "--max-tokens", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::ExitResult r = test::run_to_exit(args);
    EXPECT_EQ(r.status, 0) << r.log;
    const size_t at = r.log.find("prompt: ");
    return at == std::string::npos ? -1 : std::stoi(r.log.substr(at + 8));
  };
  // The tiny model's vocabulary is bytes with no BOS: "[user] HELLO\n" is 13 tokens; its own ChatML
  // template renders more.
  const int custom = prompt_tokens({"--chat-template", good});
  EXPECT_EQ(custom, 13);
  EXPECT_NE(prompt_tokens({}), custom);
}

// Containers pass settings as variables: every flag has one (FLASHSERVE_<FLAG>), and a flag given on
// the command line wins over it.
TEST(ServeLifecycle, FlagsComeFromTheEnvironmentToo) {
  const test::ExitResult help = test::run_to_exit({"serve", "--help"});
  EXPECT_NE(help.log.find("(Env:FLASHSERVE_MAX_NUM_SEQS)"), std::string::npos) << help.log;
  EXPECT_NE(help.log.find("(Env:FLASHSERVE_GRACE_PERIOD)"), std::string::npos) << help.log;

  setenv("FLASHSERVE_SERVED_MODEL_NAME", "from-env", 1);
  setenv("FLASHSERVE_MAX_NUM_SEQS", "0", 1);  // invalid: refused at start if read
  const test::ExitResult refused = test::run_to_exit({"serve", "--model", test::tiny_model_for_server(), "--port", "0"});
  unsetenv("FLASHSERVE_MAX_NUM_SEQS");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.log.find("max-num-seqs"), std::string::npos) << refused.log;
  {
    test::ServerProcess server(test::tiny_model_for_server());
    httplib::Client client = test::patient_client(server.http_port());
    const auto models = client.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "from-env");
  }
  {
    test::ServerProcess server(test::tiny_model_for_server(), {"--served-model-name", "from-flag"});
    httplib::Client client = test::patient_client(server.http_port());
    const auto models = client.Get("/v1/models");
    ASSERT_TRUE(models);
    EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "from-flag");
  }
  unsetenv("FLASHSERVE_SERVED_MODEL_NAME");
}

}  // namespace
}  // namespace flashserve
