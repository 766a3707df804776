// Overload and slow clients against the real binary: health stays fast whatever the clients do,
// idle and trickling connections are cut off, thousands of streams cost no threads, the waiting
// bound is exact, and a request dropped before its first token gets its real status.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "flashserve.grpc.pb.h"
#include "tests/util/patient_client.h"
#include "tests/server/http_harness.h"
#include "tests/util/server_process.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace pb = ::flashserve::v1;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int server_threads(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string key;
  while (status >> key) {
    if (key == "Threads:") {
      int n = 0;
      status >> n;
      return n;
    }
    status.ignore(1 << 20, '\n');
  }
  return -1;
}

void raise_fd_limit() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
}

std::string stream_request(int max_tokens) {
  const std::string body =
      json{{"prompt", "hello"}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}}.dump();
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

struct ReadResult {
  int seen = 0;    // connections whose bytes contained the needle
  int closed = 0;  // connections the server closed without it
};

// Reads every connection with poll() on this one thread until each has `needle` or is closed, or
// `timeout` passes.
ReadResult read_all_until(const std::vector<int>& fds, const std::string& needle, std::chrono::seconds timeout) {
  std::vector<std::string> got(fds.size());
  std::vector<bool> done(fds.size(), false);
  ReadResult result;
  size_t num_done = 0;
  const auto deadline = Clock::now() + timeout;
  while (num_done < fds.size() && Clock::now() < deadline) {
    std::vector<pollfd> pfds;
    std::vector<size_t> index;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (done[i]) continue;
      pfds.push_back({fds[i], POLLIN, 0});
      index.push_back(i);
    }
    if (poll(pfds.data(), pfds.size(), 100) <= 0) continue;
    char buf[8192];
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (!(pfds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const size_t i = index[k];
      const ssize_t n = recv(fds[i], buf, sizeof(buf), 0);
      if (n > 0) got[i].append(buf, size_t(n));
      if (got[i].find(needle) != std::string::npos) {
        ++result.seen;
      } else if (n <= 0) {
        ++result.closed;
      } else {
        continue;
      }
      done[i] = true;
      ++num_done;
    }
  }
  return result;
}

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

// The evidence the front door asks for: 200 clients trickling header bytes and 50 sending nothing,
// 64 live streams, and a health probe every 50 ms. /health answers within a second throughout
// (it used to time out for 60 s with 6 streams and 4 workers), every stream completes, the
// trickling clients get 408 and the silent ones are closed.
TEST(Overload, SlowClientsAndLiveStreamsLeaveHealthFast) {
  raise_fd_limit();
  test::ServerProcess server(test::tiny_model_for_server(),
                             {"--http-threads", "4", "--http-request-timeout", "3", "--http-idle-timeout", "2",
                              "--max-num-seqs", "64"});
  const int port = server.http_port();
  std::vector<int> trickling, silent, streams;
  for (int i = 0; i < 200; ++i) {
    trickling.push_back(connect_to(port));
    send(trickling.back(), "POST /v1/completions HTTP/1.1\r\n", 31, MSG_NOSIGNAL);
  }
  for (int i = 0; i < 50; ++i) silent.push_back(connect_to(port));
  const std::string request = stream_request(200);
  for (int i = 0; i < 64; ++i) {
    streams.push_back(connect_to(port));
    send(streams.back(), request.data(), request.size(), MSG_NOSIGNAL);
  }
  const auto t0 = Clock::now();
  std::atomic<bool> stop_probing{false};
  // A byte every 200 ms for 4 s: past the 3 s request limit, but stopping before the server's
  // lingering close ends, so no byte meets a closed socket.
  auto trickler = std::async(std::launch::async, [&] {
    while (Clock::now() - t0 < 4s) {
      for (int fd : trickling) send(fd, "X", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(200ms);
    }
  });
  auto prober = std::async(std::launch::async, [&] {
    std::vector<double> latencies;
    int failures = 0;
    while (!stop_probing) {
      httplib::Client c = test::patient_client(port);
      c.set_connection_timeout(1);
      c.set_read_timeout(1);
      const auto start = Clock::now();
      const auto r = c.Get("/health");
      if (r && r->status == 200) {
        latencies.push_back(ms_since(start));
      } else {
        ++failures;
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::make_pair(latencies, failures);
  });
  auto trickled = std::async(std::launch::async, [&] { return read_all_until(trickling, "HTTP/1.1 408", 20s); });
  auto silenced = std::async(std::launch::async, [&] { return read_all_until(silent, "HTTP/", 20s); });
  const ReadResult streamed = read_all_until(streams, "data: [DONE]", 60s);
  const double streams_ms = ms_since(t0);
  const ReadResult timed_out = trickled.get();
  const ReadResult closed = silenced.get();
  trickler.get();
  stop_probing = true;
  const auto [latencies, probe_failures] = prober.get();
  const std::string metrics = test::patient_client(port).Get("/metrics")->body;
  for (auto* fds : {&trickling, &silent, &streams}) {
    for (int fd : *fds) close(fd);
  }

  std::printf("overload: %d/64 streams completed in %.0f ms; /health %zu probes, p50 %.1f ms, p99 %.1f ms, max %.1f ms, "
              "%d failed; %d/200 trickling clients got 408; %d/50 silent connections closed; server threads %d\n",
              streamed.seen, streams_ms, latencies.size(), percentile(latencies, 0.5), percentile(latencies, 0.99),
              percentile(latencies, 1.0), probe_failures, timed_out.seen, closed.closed, server_threads(server.pid()));
  EXPECT_EQ(streamed.seen, 64);
  EXPECT_EQ(probe_failures, 0);
  EXPECT_GT(latencies.size(), 20u);
  EXPECT_LT(percentile(latencies, 0.99), 1000.0);
  EXPECT_EQ(timed_out.seen, 200);
  EXPECT_EQ(closed.closed, 50);
  EXPECT_NE(metrics.find("reason=\"timeout\"} 200"), std::string::npos) << metrics;
}

// One thread owns every socket: a thousand open streams do not add a thousand threads.
TEST(Overload, ThousandStreamsWithoutAThreadEach) {
  raise_fd_limit();
  test::ServerProcess server(test::tiny_model_for_server(), {"--max-num-seqs", "256", "--max-waiting", "2000"});
  const std::string request = stream_request(32);
  std::vector<int> fds;
  for (int i = 0; i < 1000; ++i) {
    fds.push_back(connect_to(server.http_port()));
    send(fds.back(), request.data(), request.size(), MSG_NOSIGNAL);
  }
  std::this_thread::sleep_for(200ms);
  const int threads_under_load = server_threads(server.pid());
  const int completed = read_all_until(fds, "data: [DONE]", 120s).seen;
  for (int fd : fds) close(fd);
  std::printf("1000 concurrent streams: %d completed; server threads under load: %d\n", completed, threads_under_load);
  EXPECT_EQ(completed, 1000);
  EXPECT_LT(threads_under_load, 64);
}

// A GenerateStream call that reads every message and counts how it ended.
class StreamReader : public grpc::ClientReadReactor<pb::GenerateStreamResponse> {
 public:
  StreamReader(pb::Generation::Stub& stub, const pb::GenerateRequest& req, std::atomic<int>& ok, std::atomic<int>& done)
      : ok_(ok), done_(done) {
    stub.async()->GenerateStream(&ctx_, &req, this);
    StartRead(&msg_);
    StartCall();
  }
  void OnReadDone(bool more) override {
    if (!more) return;
    finished_ = finished_ || msg_.finish_reason() != pb::FINISH_REASON_UNSPECIFIED;
    StartRead(&msg_);
  }
  void OnDone(const grpc::Status& s) override {
    ok_ += s.ok() && finished_;
    ++done_;
  }

 private:
  grpc::ClientContext ctx_;
  pb::GenerateStreamResponse msg_;
  bool finished_ = false;
  std::atomic<int>& ok_;
  std::atomic<int>& done_;
};

// gRPC's callback API: a waiting call holds no server thread either.
TEST(Overload, HundredsOfGrpcStreamsWithoutAThreadEach) {
  test::ServerProcess server(test::tiny_model_for_server(), {"--max-num-seqs", "256", "--max-waiting", "2000"});
  auto stub = pb::Generation::NewStub(grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  pb::GenerateRequest req;
  req.set_text("hello");
  req.mutable_stopping()->set_max_tokens(32);
  req.mutable_stopping()->set_ignore_eos(true);
  std::atomic<int> ok{0}, done{0};
  std::vector<std::unique_ptr<StreamReader>> calls;
  for (int i = 0; i < 500; ++i) calls.push_back(std::make_unique<StreamReader>(*stub, req, ok, done));
  std::this_thread::sleep_for(200ms);
  const int threads_under_load = server_threads(server.pid());
  for (int i = 0; i < 1200 && done < 500; ++i) std::this_thread::sleep_for(100ms);
  std::printf("500 concurrent gRPC streams: %d completed; server threads under load: %d\n", ok.load(), threads_under_load);
  EXPECT_EQ(ok.load(), 500);
  EXPECT_LT(threads_under_load, 80);
}

// --max-waiting counts accepted requests not yet started, exactly: with one running and 8 allowed
// to wait, a burst of 40 gets at most 9 in and a 429 (with Retry-After) for the rest, at once.
TEST(Overload, WaitingBoundIsExactUnderABurst) {
  // SmolLM2: its first request runs for seconds, so nothing finishes during the burst.
  test::ServerProcess server(test::real_model_path(), {"--max-num-seqs", "1", "--max-waiting", "8"});
  const std::string request = stream_request(400);
  std::vector<int> fds;
  for (int i = 0; i < 40; ++i) {
    fds.push_back(connect_to(server.http_port()));
    send(fds.back(), request.data(), request.size(), MSG_NOSIGNAL);
  }
  const int refused = read_all_until(fds, "HTTP/1.1 429", 3s).seen;
  for (int fd : fds) close(fd);
  std::printf("burst of 40 against --max-waiting 8 --max-num-seqs 1: %d refused\n", refused);
  EXPECT_GE(refused, 31);
  EXPECT_LE(refused, 32);
}

// A request dropped by the queue-time limit before its first token gets 429 (with Retry-After),
// streamed or not: the status line waits for the first event. It used to be a 200 with an error.
TEST(Overload, DroppedBeforeItsFirstTokenGetsItsRealStatus) {
  test::ServerProcess server(test::real_model_path(),
                             {"--max-num-seqs", "1", "--max-queue-time", "0.5", "--max-waiting", "8"});
  test::RawConnection running(server.http_port(), stream_request(300));  // seconds of decoding
  running.read_until("data:");
  auto post = [&](bool stream) {
    httplib::Client c = test::patient_client(server.http_port());
    return c.Post("/v1/completions", json{{"prompt", "hi"}, {"max_tokens", 2}, {"stream", stream}}.dump(),
                  "application/json");
  };
  auto plain = std::async(std::launch::async, post, false);
  auto streamed = std::async(std::launch::async, post, true);
  for (auto* f : {&plain, &streamed}) {
    const auto r = f->get();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "rate_limit_exceeded") << r->body;
  }
}

}  // namespace
}  // namespace flashserve
