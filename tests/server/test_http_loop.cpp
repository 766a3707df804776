// The event loop's worker queue with a handler the test holds: a request that waits for a worker
// past max_queue_time is answered 429 by the loop without ever running, a handler whose client
// left or whose server stops is told to give up, and what still waits at stop is answered 503.
// Nothing here depends on timing: the test decides when each handler returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "server/http_loop.h"
#include "server/http_wire.h"
#include "tests/server/http_harness.h"

namespace flashserve::test {
namespace {

using namespace std::chrono_literals;

// "/hold" runs until released or cancelled; anything else answers at once.
class HeldHandler : public HttpHandler {
 public:
  bool runs_inline(std::string_view, std::string_view) const override { return false; }
  RoutedResponse handle(const std::string& request, const ExchangeInfo& info) override {
    const bool hold = request.starts_with("GET /hold ");
    if (!hold) ++quick_runs;
    if (hold) holding = true;
    while (hold && !released && !(info.cancelled && info.cancelled())) std::this_thread::sleep_for(1ms);
    if (hold && info.cancelled && info.cancelled()) saw_cancel = true;
    RoutedResponse r;
    r.bytes = http_response(200, "text/plain", "done", {}, info.closing);
    return r;
  }
  std::string refusal(int status, const std::string& message, std::string_view, bool close) override {
    HeaderList headers;
    if (status == 429 || status == 503) headers.emplace_back("Retry-After", "1");
    return http_response(status, "text/plain", message, headers, close);
  }

  std::atomic<bool> holding{false};  // a /hold request has a worker
  std::atomic<bool> released{false};
  std::atomic<bool> saw_cancel{false};
  std::atomic<int> quick_runs{0};
};

HttpLoopOptions one_worker(std::chrono::milliseconds max_queue_time) {
  HttpLoopOptions o;
  o.port = 0;
  o.num_workers = 1;
  o.max_queue_time = max_queue_time;
  return o;
}

std::string get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"; }

TEST(HttpLoopQueue, WaitingForAWorkerPastTheQueueTimeIsA429FromTheLoop) {
  HeldHandler handler;
  HttpLoop loop(handler, one_worker(200ms));
  loop.start();
  RawConnection hold(loop.port(), get("/hold"));
  while (!handler.holding) std::this_thread::sleep_for(1ms);
  RawConnection queued(loop.port(), get("/quick"));
  const std::string answer = queued.read_until("\r\n\r\n");
  EXPECT_EQ(answer.rfind("HTTP/1.1 429", 0), 0u) << answer;
  EXPECT_NE(answer.find("Retry-After: 1"), std::string::npos) << answer;
  handler.released = true;
  EXPECT_NE(hold.read_until("done").find("200 OK"), std::string::npos);
  // The refused request never ran, and the connection it came on serves the next one.
  queued.send_more(get("/quick"));
  EXPECT_NE(queued.read_until("done").find("done"), std::string::npos);
  EXPECT_EQ(handler.quick_runs, 1);
  loop.stop(std::chrono::steady_clock::now() + 5s);
}

TEST(HttpLoopQueue, AClientThatLeavesCancelsItsHandler) {
  HeldHandler handler;
  HttpLoop loop(handler, one_worker(0ms));
  loop.start();
  {
    RawConnection hold(loop.port(), get("/hold"));
    while (!handler.holding) std::this_thread::sleep_for(1ms);
  }  // hung up
  for (int i = 0; i < 30000 && !handler.saw_cancel; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(handler.saw_cancel);
  loop.stop(std::chrono::steady_clock::now() + 5s);
}

TEST(HttpLoopQueue, StopCancelsWhatRunsAndAnswersWhatWaits) {
  HeldHandler handler;
  HttpLoop loop(handler, one_worker(0ms));
  loop.start();
  RawConnection hold(loop.port(), get("/hold"));
  while (!handler.holding) std::this_thread::sleep_for(1ms);
  RawConnection waiting(loop.port(), get("/quick"));
  while (loop.num_queued() != 1) std::this_thread::sleep_for(1ms);
  // Never released: only the cancel can end the held handler, so a stop that returns proves it.
  auto stopped = std::async(std::launch::async, [&] { loop.stop(std::chrono::steady_clock::now() + 5s); });
  ASSERT_EQ(stopped.wait_for(60s), std::future_status::ready);
  EXPECT_TRUE(handler.saw_cancel);
  EXPECT_EQ(waiting.read_until("\r\n\r\n").rfind("HTTP/1.1 503", 0), 0u);
  EXPECT_EQ(handler.quick_runs, 0);
}

}  // namespace
}  // namespace flashserve::test
