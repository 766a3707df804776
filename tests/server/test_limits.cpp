// Every size is checked before memory or time is committed, against the real binary: bodies
// (chunked or not), max_tokens at the edge of int32, prompts x n, oversized prompts, unparsable
// gRPC messages, and a GGUF that claims a huge metadata array.
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "flashserve.grpc.pb.h"
#include "tests/util/patient_client.h"
#include "tests/server/http_harness.h"
#include "tests/util/gguf_bytes.h"
#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace pb = ::flashserve::v1;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The server's resident memory, from /proc.
long rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  long value = 0;
  while (status >> key) {
    if (key == "VmRSS:") {
      status >> value;
      return value;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

// Raw bytes to the HTTP port; returns the status line's code (or -1).
int raw_status(int port, const std::string& bytes) {
  test::RawConnection c(port, bytes);
  const std::string reply = c.read_until("\r\n");
  return reply.size() > 12 ? std::atoi(reply.c_str() + 9) : -1;
}

TEST(Limits, ChunkedBodyObeysMaxBodyBytes) {
  test::ServerProcess server(test::tiny_model_for_server(), {"--max-body-bytes", "100000"});
  const std::string body = json{{"prompt", std::string(200000, 'a')}, {"max_tokens", 1}}.dump();
  std::string chunked = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (size_t at = 0; at < body.size(); at += 4096) {
    const std::string part = body.substr(at, 4096);
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", part.size());
    chunked += size + part + "\r\n";
  }
  chunked += "0\r\n\r\n";
  EXPECT_EQ(raw_status(server.http_port(), chunked), 413);
  EXPECT_EQ(raw_status(server.http_port(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                                               std::to_string(body.size()) + "\r\n\r\n" + body),
            413);
  httplib::Client http = test::patient_client(server.http_port());
  EXPECT_EQ(http.Get("/health")->status, 200);
}

// prompt + INT32_MAX used to wrap, admit the request, and stall the engine for everyone.
TEST(Limits, MaxTokensAtInt32MaxIsRefusedAndNothingStalls) {
  test::ServerProcess server(test::tiny_model_for_server());
  httplib::Client http = test::patient_client(server.http_port());
  const auto t0 = Clock::now();
  const auto huge = http.Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2147483647}}.dump(), "application/json");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400) << huge->body;
  EXPECT_EQ(json::parse(huge->body)["error"]["code"], "context_length_exceeded");
  const auto next = http.Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 4}}.dump(), "application/json");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200) << next->body;
  EXPECT_LT(seconds_since(t0), 5.0);
  EXPECT_EQ(json::parse(next->body)["usage"]["completion_tokens"], 4);
}

// A 15 MB message used to hold a worker for ~19 s while it was tokenized, then be refused.
TEST(Limits, OversizedPromptIsRefusedWithoutTokenizing) {
  test::ServerProcess server(test::real_model_path(), {"--max-body-bytes", "33554432"});
  httplib::Client http = test::patient_client(server.http_port());
  const json body = {{"messages", {{{"role", "user"}, {"content", std::string(15 << 20, 'x')}}}}, {"max_tokens", 1}};
  const auto t0 = Clock::now();
  const auto r = http.Post("/v1/chat/completions", body.dump(), "application/json");
  const double elapsed = seconds_since(t0);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body.substr(0, 300);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "context_length_exceeded");
  EXPECT_LT(elapsed, 3.0) << "the prompt was tokenized before its size was checked";
}

// 100k prompts x n=16 in a ~500 KB body: refused from the counts alone, before any prompt is
// tokenized or any request allocated (RSS used to grow 305 -> 451 MB before a 429).
TEST(Limits, PromptsTimesNIsCheckedBeforeAnythingIsAllocated) {
  test::ServerProcess server(test::real_model_path());
  httplib::Client http = test::patient_client(server.http_port());
  json prompts = json::array();
  for (int i = 0; i < 100000; ++i) prompts.push_back("hi");
  const std::string body = json{{"prompt", prompts}, {"n", 16}, {"max_tokens", 1}}.dump();
  ASSERT_GT(body.size(), 500000u);
  const long before = rss_kib(server.pid());
  const auto t0 = Clock::now();
  const auto r = http.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;  // it could never be admitted: not 429
  EXPECT_NE(r->body.find("100000 prompts x n=16"), std::string::npos) << r->body;
  EXPECT_LT(seconds_since(t0), 3.0);
  const long growth_mib = (rss_kib(server.pid()) - before) / 1024;
  EXPECT_LT(growth_mib, 40) << "RSS grew by " << growth_mib << " MiB";
  std::printf("RSS before %ld MiB, after %ld MiB\n", before / 1024, rss_kib(server.pid()) / 1024);
}

TEST(Limits, UnparsableAndUnknownGrpcFieldsAreInvalidArgument) {
  test::ServerProcess server(test::tiny_model_for_server());
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  auto call = [&](const std::string& bytes) {
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1), response;
    grpc::ClientContext ctx;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, "/flashserve.v1.Generation/Generate", grpc::StubOptions(), &request, &response,
                   [&](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  };
  const grpc::Status garbage = call("\xff\xff\xff\xff");
  EXPECT_EQ(garbage.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(garbage.error_message().find("GenerateRequest"), std::string::npos) << garbage.error_message();
  std::string with_unknown;
  pb::GenerateRequest req;
  req.set_text("hi");
  req.SerializeToString(&with_unknown);
  with_unknown += std::string("\xf8\x06\x01", 3);  // field 111, varint 1: not in our schema
  const grpc::Status unknown = call(with_unknown);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(unknown.error_message().find("111"), std::string::npos) << unknown.error_message();
}

// A GGUF of one metadata array: `count` U8 elements (zeros), nothing else, so the server refuses it.
std::string array_only_gguf(const std::string& name, uint64_t count) {
  const std::string path = (fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()) + ".gguf")).string();
  test::GgufBytes b = test::gguf_header(0, 1);
  b.key("general.blob", GgufType::ARRAY).array(GgufType::U8, count);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.b.data()), std::streamsize(b.b.size()));
  }
  fs::resize_file(path, b.b.size() + count);
  return path;
}

// --grpc-max-connection-idle: a connection without calls is closed by the server (GOAWAY), so
// idle clients do not hold server resources; the channel reconnects on its next call.
TEST(Limits, IdleGrpcConnectionsAreClosed) {
  test::ServerProcess server(test::tiny_model_for_server(), {"--grpc-max-connection-idle", "1"});
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = pb::Generation::NewStub(channel);
  auto info = [&] {
    grpc::ClientContext ctx;
    pb::ModelInfo m;
    return stub->GetModelInfo(&ctx, {}, &m);
  };
  ASSERT_TRUE(info().ok());
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_READY);
  for (int i = 0; i < 100 && channel->GetState(false) == GRPC_CHANNEL_READY; ++i) std::this_thread::sleep_for(100ms);
  EXPECT_EQ(channel->GetState(false), GRPC_CHANNEL_IDLE);
  EXPECT_TRUE(info().ok());
}

// A 98 MB file claiming a U8 metadata array of ~98M elements used to take ~4.8 GB before being
// refused. The reader reads arrays in place now: refused with its name, at a peak no larger than
// the process's own baseline plus the mapped file.
TEST(Limits, HugeMetadataArrayDoesNotAmplifyMemory) {
  auto refuse = [](const std::string& path) {
    const test::ExitResult r = test::run_to_exit({"serve", "--model", path, "--port", std::to_string(test::free_port())});
    fs::remove(path);
    EXPECT_EQ(r.status, 1) << r.log;
    EXPECT_NE(r.log.find(path), std::string::npos) << r.log;
    return r.max_rss_kib;
  };
  const uint64_t count = 98ull << 20;
  const long baseline_kib = refuse(array_only_gguf("flashserve-small-array", 16));
  const long huge_kib = refuse(array_only_gguf("flashserve-huge-array", count));
  std::printf("peak RSS refusing a 98 MiB file: %ld MiB (a tiny file: %ld MiB)\n", huge_kib / 1024, baseline_kib / 1024);
  EXPECT_LT(huge_kib - baseline_kib, long(count / 1024) + 32 * 1024);
}

}  // namespace
}  // namespace flashserve
