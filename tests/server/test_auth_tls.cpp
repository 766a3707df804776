// One authentication policy for HTTP and gRPC, and TLS on both, against the real binary. gRPC used
// to answer Generate with no key or a wrong one while the log said "API key required".
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "flashserve.grpc.pb.h"
#include "server/tls.h"
#include "tests/util/patient_client.h"
#include "tests/server/grpc_harness.h"
#include "tests/util/server_process.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
namespace pb = ::flashserve::v1;

constexpr char kKey[] = "key-0123456789";

grpc::Status generate(pb::Generation::Stub& stub, const std::string& authorization, pb::GenerateResponse* resp) {
  grpc::ClientContext ctx;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return stub.Generate(&ctx, test::text_request("hello", 3), resp);
}

// One ServerReflectionInfo exchange of reflection `version` (v1alpha or v1: the same messages), the
// request encoded by hand (gRPC installs no generated code for v1alpha). Returns the raw response.
std::string reflection_call(const std::shared_ptr<grpc::Channel>& channel, const std::string& request,
                            const std::string& version = "v1alpha") {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection." + version + ".ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  call->StartCall(reinterpret_cast<void*>(1));
  cq.Next(&tag, &ok);
  grpc::Slice slice(request);
  grpc::ByteBuffer out(&slice, 1), in;
  call->Write(out, reinterpret_cast<void*>(2));
  cq.Next(&tag, &ok);
  call->Read(&in, reinterpret_cast<void*>(3));
  cq.Next(&tag, &ok);
  std::string bytes;
  if (ok) {
    std::vector<grpc::Slice> slices;
    in.Dump(&slices);
    for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  call->WritesDone(reinterpret_cast<void*>(4));
  cq.Next(&tag, &ok);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  cq.Next(&tag, &ok);
  return bytes;
}

// list_services (field 7): "*".
std::string reflection_list_services(const std::shared_ptr<grpc::Channel>& channel,
                                     const std::string& version = "v1alpha") {
  return reflection_call(channel, std::string("\x3a\x01*", 3), version);
}

// The field numbers at the top level of a protobuf message.
std::vector<int> top_level_fields(const std::string& bytes) {
  std::vector<int> fields;
  size_t at = 0;
  auto varint = [&] {
    uint64_t v = 0;
    for (int shift = 0; at < bytes.size() && shift < 64; shift += 7) {
      const auto b = uint8_t(bytes[at++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    return v;
  };
  while (at < bytes.size()) {
    const uint64_t tag = varint();
    fields.push_back(int(tag >> 3));
    switch (tag & 7) {
      case 0: varint(); break;
      case 1: at += 8; break;
      case 2: at += size_t(varint()); break;
      case 5: at += 4; break;
      default: return fields;
    }
  }
  return fields;
}

TEST(Auth, GrpcNeedsTheKeyLikeHttp) {
  test::ServerProcess server(test::tiny_model_for_server(), {"--api-key", kKey});
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = pb::Generation::NewStub(channel);
  pb::GenerateResponse resp;
  EXPECT_EQ(generate(*stub, "", &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(*stub, "Bearer wrong", &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(generate(*stub, kKey, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);  // no scheme
  EXPECT_TRUE(resp.text().empty());
  const grpc::Status ok = generate(*stub, std::string("Bearer ") + kKey, &resp);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(resp.usage().completion_tokens(), 3);

  // Streams and the small methods too; health and reflection stay open (as /health does).
  grpc::ClientContext ctx;
  auto reader = stub->GenerateStream(&ctx, test::text_request("hello", 3));
  pb::GenerateStreamResponse msg;
  while (reader->Read(&msg)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext info_ctx;
  pb::ModelInfo info;
  EXPECT_EQ(stub->GetModelInfo(&info_ctx, {}, &info).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(test::health_status(channel, ""), 1);
  EXPECT_NE(reflection_list_services(channel).find("flashserve.v1.Generation"), std::string::npos);
  // Both versions, each listing every service, and every listed service can be described, health
  // included: file_containing_symbol (field 4) gets file_descriptor_response (field 4), not
  // error_response (field 7).
  for (const std::string version : {"v1alpha", "v1"}) {
    SCOPED_TRACE(version);
    const std::string listed = reflection_list_services(channel, version);
    for (const char* service : {"flashserve.v1.Generation", "grpc.health.v1.Health",
                                "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"}) {
      EXPECT_NE(listed.find(service), std::string::npos) << service;
    }
    for (const std::string symbol : {"grpc.health.v1.Health", "flashserve.v1.Generation"}) {
      SCOPED_TRACE(symbol);
      const std::string answer =
          reflection_call(channel, "\x22" + std::string(1, char(symbol.size())) + symbol, version);
      const std::vector<int> fields = top_level_fields(answer);
      EXPECT_NE(std::find(fields.begin(), fields.end(), 4), fields.end()) << answer;
      EXPECT_EQ(std::find(fields.begin(), fields.end(), 7), fields.end()) << answer;
    }
  }

  httplib::Client http = test::patient_client(server.http_port());
  EXPECT_EQ(http.Get("/v1/models")->status, 401);
  EXPECT_EQ(http.Get("/v1/models", {{"Authorization", std::string("Bearer ") + kKey}})->status, 200);
  EXPECT_EQ(http.Get("/health")->status, 200);
  EXPECT_EQ(http.Get("/metrics")->status, 200);
  const std::string metrics = http.Get("/metrics")->body;
  EXPECT_NE(metrics.find("flashserve_request_rejected_total{model_name=\"server"), std::string::npos);
  EXPECT_NE(metrics.find("reason=\"unauthenticated\"} 6"), std::string::npos) << metrics;
}

TEST(Auth, KeyFromAFileOrTheEnvironment) {
  const fs::path file = fs::temp_directory_path() / ("flashserve-keyfile-" + std::to_string(::getpid()));
  std::ofstream(file) << "from-a-file\n";
  test::ServerProcess by_file(test::tiny_model_for_server(), {"--api-key-file", file.string()});
  httplib::Client http = test::patient_client(by_file.http_port());
  EXPECT_EQ(http.Get("/v1/models", {{"Authorization", "Bearer from-a-file"}})->status, 200);
  EXPECT_EQ(http.Get("/v1/models", {{"Authorization", "Bearer from-a-fil"}})->status, 401);
  fs::remove(file);

  setenv("FLASHSERVE_API_KEY", "from-env", 1);
  test::ServerProcess by_env(test::tiny_model_for_server());
  unsetenv("FLASHSERVE_API_KEY");
  auto channel = grpc::CreateChannel(by_env.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = pb::Generation::NewStub(channel);
  pb::GenerateResponse resp;
  EXPECT_EQ(generate(*stub, "", &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(generate(*stub, "Bearer from-env", &resp).ok());
}

// A self-signed certificate for 127.0.0.1, made with the openssl command line.
struct Certificate {
  fs::path cert, key;
};
Certificate self_signed() {
  const fs::path dir = fs::temp_directory_path() / ("flashserve-tls-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Certificate c{dir / "cert.pem", dir / "key.pem"};
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                          "-addext subjectAltName=IP:127.0.0.1 -keyout " + c.key.string() + " -out " + c.cert.string() +
                          " >/dev/null 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return c;
}

TEST(Tls, HttpsAndGrpcOverTls) {
  const Certificate c = self_signed();
  test::ServerProcess server(test::tiny_model_for_server(),
                             {"--tls-cert", c.cert.string(), "--tls-key", c.key.string(), "--api-key", kKey});
  httplib::SSLClient https("127.0.0.1", server.http_port());
  https.set_ca_cert_path(c.cert.c_str());
  https.enable_server_certificate_verification(true);
  const auto r = https.Post("/v1/completions", {{"Authorization", std::string("Bearer ") + kKey}},
                            R"({"prompt": "hello", "max_tokens": 3, "stream": true})", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << "\n" << server.log();
  EXPECT_EQ(r->status, 200);
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos) << r->body;
  // Plain HTTP to the TLS port gets nowhere.
  httplib::Client plain = test::patient_client(server.http_port());
  plain.set_read_timeout(2);
  const auto refused = plain.Get("/health");
  EXPECT_TRUE(!refused || refused->status != 200);

  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_text_file(c.cert.string());
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::SslCredentials(ssl));
  auto stub = pb::Generation::NewStub(channel);
  pb::GenerateResponse resp;
  const grpc::Status s = generate(*stub, std::string("Bearer ") + kKey, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.usage().completion_tokens(), 3);
  auto insecure = pb::Generation::NewStub(grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  EXPECT_FALSE(generate(*insecure, std::string("Bearer ") + kKey, &resp).ok());
}

// A client that opens a TLS connection and never finishes the handshake owes us bytes, like one
// that trickles a request: it is cut off at the request timeout, not held for the idle one.
TEST(Tls, AStalledHandshakeIsCutOffAtTheRequestTimeout) {
  const Certificate c = self_signed();
  test::ServerProcess server(test::tiny_model_for_server(), {"--tls-cert", c.cert.string(), "--tls-key",
                                                             c.key.string(), "--http-request-timeout", "1",
                                                             "--http-idle-timeout", "600"});
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(server.http_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(send(fd, "\x16\x03\x01", 3, MSG_NOSIGNAL), 3);  // the start of a ClientHello, then nothing
  timeval tv{120, 0};  // far below the idle timeout: only the request timeout can end it in time
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
  }
  EXPECT_EQ(n, 0) << "not closed by the server (errno " << errno << ")";
  close(fd);
}

TEST(Tls, UnreadableKeyFailsAtStartWithItsName) {
  const Certificate c = self_signed();
  const test::ExitResult r = test::run_to_exit({"serve", "--model", test::tiny_model_for_server(), "--port",
                                                std::to_string(test::free_port()), "--tls-cert", c.cert.string(),
                                                "--tls-key", c.cert.string()});
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_NE(r.log.find("TLS"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace flashserve
