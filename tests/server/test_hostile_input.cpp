// Requests written to hurt the server: JSON nested a million deep in every field of every route,
// objects of 50,000 keys, answers the client asked to end its connection, a new connection while
// the server drains. Each must get a clear answer, and the server must go on answering.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/server/http_harness.h"
#include "tests/util/request_holes.h"

namespace flashserve::test {
namespace {

constexpr int kHostileDepth = 1'000'000;

// `depth` arrays, or objects {"a": ...}, inside one another around a 1.
std::string nested(int depth, bool objects) {
  std::string s;
  s.reserve(size_t(depth) * (objects ? 6 : 2) + 1);
  for (int i = 0; i < depth; ++i) s += objects ? "{\"a\":" : "[";
  s += "1";
  for (int i = 0; i < depth; ++i) s += objects ? '}' : ']';
  return s;
}

class HostileInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { h_ = new HttpHarness(tiny_model()); }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static HttpHarness* h_;
};
HttpHarness* HostileInput::h_ = nullptr;

TEST_F(HostileInput, NestingAMillionDeepInEveryFieldOfEveryRouteIsA400) {
  const std::string arrays = nested(kHostileDepth, false), objects = nested(kHostileDepth, true);
  int sent = 0;
  for (const RouteHoles& route : route_holes()) {
    for (const std::string& request : route.requests) {
      for (const std::string* deep : {&arrays, &objects}) {
        const Reply r = post(*h_, route.path, fill_hole(request, *deep));
        ASSERT_EQ(r.status, 400) << route.path << " " << request << ": " << r.text.substr(0, 300);
        EXPECT_NE(r.body["error"]["message"].get<std::string>().find("nested deeper than 128 levels"),
                  std::string::npos)
            << r.text;
        ++sent;
      }
    }
  }
  EXPECT_GT(sent, 100);
  EXPECT_EQ(get(*h_, "/health").status, 200);
  EXPECT_EQ(post(*h_, "/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}}).status, 200);
}

TEST_F(HostileInput, NestingUpToTheLimitIsParsedAndCheckedAsUsual) {
  // 128 levels: the body object plus 127 arrays, read as JSON and then refused for its type.
  const Reply at_limit = post(*h_, "/v1/completions", "{\"prompt\": " + nested(127, false) + "}");
  EXPECT_EQ(at_limit.status, 400);
  EXPECT_EQ(at_limit.text.find("nested deeper"), std::string::npos) << at_limit.text;
  const Reply past = post(*h_, "/v1/completions", "{\"prompt\": " + nested(128, false) + "}");
  EXPECT_EQ(past.status, 400);
  EXPECT_NE(past.text.find("nested deeper than 128 levels"), std::string::npos) << past.text;
}

// ordered_json finds each key's place by a linear search, so an object of 50,000 keys would cost
// over a billion compares; objects are bounded while parsing instead (fuzz_request_shapes found it).
TEST_F(HostileInput, ObjectsWithTooManyKeysAreA400) {
  auto object = [](int keys, int from = 0) {
    std::string s = "{";
    for (int i = 0; i < keys; ++i) s += (i ? ",\"" : "\"") + std::to_string(from + i) + "\":1";
    return s + "}";
  };
  const Reply wide = post(*h_, "/v1/completions", "{\"prompt\": \"hi\", \"logit_bias\": " + object(50000) + "}");
  EXPECT_EQ(wide.status, 400);
  EXPECT_NE(wide.text.find("an object of over 1024 keys"), std::string::npos) << wide.text.substr(0, 300);
  std::string many = "[";
  for (int i = 0; i < 70; ++i) many += (i ? "," : "") + object(1000, i * 1000);
  const Reply total = post(*h_, "/v1/completions", "{\"prompt\": \"hi\", \"x\": " + many + "]}");
  EXPECT_EQ(total.status, 400);
  EXPECT_NE(total.text.find("over 65536 keys in all"), std::string::npos) << total.text.substr(0, 300);
  // 1024 keys, as logit_bias may hold, still parse (and are then checked as token ids).
  const Reply at_limit = post(*h_, "/v1/completions", "{\"prompt\": \"hi\", \"logit_bias\": " + object(1024) + "}");
  EXPECT_EQ(at_limit.text.find("keys"), std::string::npos) << at_limit.text.substr(0, 300);
}

// Reads until the server closes the connection (true) or 30 s pass (false).
bool read_to_close(int port, const std::string& request, std::string& got) {
  RawConnection c(port, request);
  got = c.read_until("\x01never\x01");
  return c.closed_by_peer();
}

// Answers httplib gives before it reads the headers (a lowercase or unknown method, a URI too long)
// and others (a Range of 2000 parts) close the connection when the client asked for that.
TEST_F(HostileInput, ConnectionCloseIsHonouredOnEveryAnswer) {
  std::string ranges = "bytes=0-0";
  for (int i = 1; i < 2000; ++i) ranges += "," + std::to_string(2 * i) + "-" + std::to_string(2 * i);
  const std::string close = "Host: x\r\nConnection: close\r\n\r\n";
  const std::vector<std::string> requests = {
      "get /health HTTP/1.1\r\n" + close,
      "FOO /v1/models HTTP/1.1\r\n" + close,
      "GET /v1/models/" + std::string(9000, 'a') + " HTTP/1.1\r\n" + close,
      "GET /v1/models HTTP/1.1\r\nRange: " + ranges + "\r\n" + close,
      "GET /health HTTP/1.1\r\nConnection: keep-alive, close\r\nHost: x\r\n\r\n",
      "GET /health HTTP/1.0\r\nHost: x\r\n\r\n",
  };
  for (const std::string& request : requests) {
    std::string got;
    EXPECT_TRUE(read_to_close(h_->server.port(), request, got)) << request.substr(0, 60) << "\n" << got;
    EXPECT_EQ(got.rfind("HTTP/1.", 0), 0u) << got;
  }
}

// A connection opened while the server drains, whose request comes a moment later, is answered
// 503 (come back elsewhere), not reset.
TEST(HostileDraining, ANewConnectionsRequestGetsA503) {
  HttpHarness h(tiny_model());
  h.serving.start_draining();
  h.server.set_draining();
  const std::string body = json{{"prompt", "hi"}, {"max_tokens", 2}}.dump();
  RawConnection c(h.server.port(), std::string());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // past the loop's 100 ms timer tick
  c.send_more("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              std::to_string(body.size()) + "\r\n\r\n" + body);
  const std::string got = c.read_until("\r\n\r\n");
  EXPECT_EQ(got.rfind("HTTP/1.1 503", 0), 0u) << got;
}

}  // namespace
}  // namespace flashserve::test
