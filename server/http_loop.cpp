#include "server/http_loop.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/http_connection.h"
#include "server/loop_waker.h"
#include "server/tls.h"
#include "server/worker_pool.h"

namespace flashserve {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kListenerKey = 0;
constexpr uint64_t kWakerKey = 1;
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr auto kLinger = std::chrono::seconds(2);

// A request handed to the worker pool. The worker and the loop race for it: the worker claims it
// to run it, the loop to drop it unrun (it waited past max_queue_time, its client left, the server
// stops), and exactly one of them wins. `cancelled` tells a handler already running to give up.
struct WorkerTask {
  enum State : int { kQueued, kRunning, kDropped };
  bool claim(State to) {
    int expected = kQueued;
    return state.compare_exchange_strong(expected, to);
  }
  std::atomic<int> state{kQueued};
  std::atomic<bool> cancelled{false};
};

// The loop's side of a task, per connection.
struct PendingTask {
  std::shared_ptr<WorkerTask> task;
  SteadyClock::time_point queued_at;
  size_t charge;  // request-buffer bytes the task holds
};

}  // namespace

struct HttpLoop::Impl {
  Impl(HttpHandler& handler, HttpLoopOptions options) : handler(handler), options(std::move(options)) {}

  void run();
  void accept_all();
  void on_event(Connection& c, uint32_t events);
  void on_readable(Connection& c);
  void frame(Connection& c);
  void dispatch(Connection& c);
  void apply(Connection& c, RoutedResponse r);
  void pump(Connection& c);
  void flush(Connection& c);
  void refuse(Connection& c, int status, const std::string& message, std::string_view reason, bool close);
  void close(Connection& c);
  void check_timers(SteadyClock::time_point now);
  void take_wakeups();
  void begin_stop();
  void update_interest(Connection& c);
  bool idle_to_close_while_draining(const Connection& c, SteadyClock::time_point now) const;
  bool all_lingering() const;
  size_t read_cap(const Connection& c) const;
  bool charge(Connection& c);
  Connection* find(uint64_t id);
  bool drop_task(uint64_t conn_id);
  void expire_queued(SteadyClock::time_point now);

  HttpHandler& handler;
  HttpLoopOptions options;
  std::shared_ptr<LoopWaker> waker = std::make_shared<LoopWaker>();
  std::unique_ptr<WorkerPool> workers;
  int listen_fd = -1;
  int epoll_fd = -1;
  int port = -1;
  std::thread thread;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns;
  std::unordered_map<uint64_t, PendingTask> tasks;  // by connection: requests with the worker pool
  uint64_t next_id = 2;
  size_t buffered_bytes = 0;  // loop thread only
  std::atomic<bool> draining{false};
  std::atomic<bool> stop_requested{false};
  std::atomic<SteadyClock::rep> stop_deadline{0};
  bool stopping = false;  // loop thread: stop has begun
  SteadyClock::time_point last_timer_check;
};

HttpLoop::HttpLoop(HttpHandler& handler, HttpLoopOptions options)
    : impl_(std::make_unique<Impl>(handler, std::move(options))) {}

HttpLoop::~HttpLoop() { stop(SteadyClock::now()); }

void HttpLoop::start() {
  Impl& s = *impl_;
  s.listen_fd = listen_socket(s.options.host, s.options.port, s.port);
  s.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenerKey;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.listen_fd, &ev);
  ev.data.u64 = kWakerKey;
  epoll_ctl(s.epoll_fd, EPOLL_CTL_ADD, s.waker->fd(), &ev);
  s.workers = std::make_unique<WorkerPool>(s.options.num_workers, s.options.max_queued);
  s.thread = std::thread([&s] { s.run(); });
}

int HttpLoop::port() const { return impl_->port; }

void HttpLoop::set_draining() {
  impl_->draining = true;
  impl_->waker->nudge();
}

void HttpLoop::stop(SteadyClock::time_point deadline) {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  s.stop_deadline = deadline.time_since_epoch().count();
  s.stop_requested = true;
  s.waker->nudge();
  s.thread.join();
  // Workers may still finish requests; their answers find the waker closed and are dropped, which
  // cancels whatever they had started.
  s.waker->close();
  s.workers.reset();
  ::close(s.epoll_fd);
}

size_t HttpLoop::num_queued() const { return impl_->workers ? impl_->workers->num_queued() : 0; }

void HttpLoop::Impl::run() {
  std::vector<epoll_event> events(256);
  for (;;) {
    const int n = epoll_wait(epoll_fd, events.data(), int(events.size()), int(kTick.count()));
    if (stop_requested && !stopping) begin_stop();
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[size_t(i)].data.u64;
      if (key == kListenerKey) {
        accept_all();
      } else if (key == kWakerKey) {
        take_wakeups();
      } else if (Connection* c = find(key)) {
        on_event(*c, events[size_t(i)].events);
      }
    }
    const auto now = SteadyClock::now();
    if (now - last_timer_check >= kTick) check_timers(now);
    if (stopping && (all_lingering() || now.time_since_epoch().count() >= stop_deadline)) break;
  }
  while (!conns.empty()) close(*conns.begin()->second);
}

// Stopping is done once every answer is out; lingering connections need no more waiting for.
bool HttpLoop::Impl::all_lingering() const {
  for (const auto& [id, c] : conns) {
    if (c->phase != Connection::Phase::Lingering) return false;
  }
  return true;
}

Connection* HttpLoop::Impl::find(uint64_t id) {
  auto it = conns.find(id);
  return it == conns.end() ? nullptr : it->second.get();
}

void HttpLoop::Impl::accept_all() {
  for (;;) {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) spdlog::warn("HTTP: out of file descriptors; raise `ulimit -n`");
      return;
    }
    const int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));  // stream chunks are small
    SSL* ssl = options.tls ? options.tls->accept(fd) : nullptr;
    if (options.tls && !ssl) {
      ::close(fd);
      continue;
    }
    const uint64_t id = next_id++;
    auto conn = std::make_unique<Connection>(
        id, fd, ssl, peer_of(addr), FramingLimits{options.max_head_bytes, options.max_body_bytes});
    Connection& c = *conn;
    conns.emplace(id, std::move(conn));
    if (int(conns.size()) > options.max_connections) {
      // Answered rather than left waiting: the client learns at once that it should come back.
      refuse(c, 503, "too many open connections; retry later", "connections", true);
      continue;
    }
    update_interest(c);
  }
}

void HttpLoop::Impl::on_event(Connection& c, uint32_t events) {
  const uint64_t id = c.id;
  if (events & (EPOLLHUP | EPOLLERR)) {
    close(c);
    return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) on_readable(c);
  Connection* still = find(id);
  if (still && (events & EPOLLOUT)) flush(*still);
  if ((still = find(id))) update_interest(*still);
}

// The whole of a request, plus what chunked framing can add, while one is being read; afterwards
// only a little, to notice a hang-up (and hold a pipelined request) while the answer is under way.
size_t HttpLoop::Impl::read_cap(const Connection& c) const {
  if (c.phase == Connection::Phase::Lingering) return 64 << 10;
  if (c.phase == Connection::Phase::Idle || c.phase == Connection::Phase::Reading) {
    return options.max_head_bytes + 2 * options.max_body_bytes + (64 << 10);
  }
  return options.max_head_bytes;
}

// Counts the connection's unframed bytes against the budget shared by all connections.
bool HttpLoop::Impl::charge(Connection& c) {
  if (c.phase != Connection::Phase::Reading || c.in.size() <= c.budget_charged) return true;
  const size_t more = c.in.size() - c.budget_charged;
  if (buffered_bytes + more > options.max_buffered_bytes) return false;
  buffered_bytes += more;
  c.budget_charged += more;
  return true;
}

void HttpLoop::Impl::on_readable(Connection& c) {
  if (c.phase == Connection::Phase::Lingering) {  // read only to see the client close
    const bool gone = c.read_some(64 << 10) == Connection::Io::Closed;
    c.in.clear();
    if (gone) close(c);
    return;
  }
  const size_t cap = read_cap(c);
  if (c.in.size() >= cap) {
    if (c.phase == Connection::Phase::Reading) {
      refuse(c, 413, "the request's chunked framing is too large", "body_too_large", true);
    } else {
      close(c);  // only a hang-up wakes a connection we stopped reading from
    }
    return;
  }
  if (c.read_some(cap) == Connection::Io::Closed) {
    close(c);  // the client is gone: whatever it asked for is cancelled with the connection
    return;
  }
  if (c.phase == Connection::Phase::Idle && !c.in.empty()) {
    c.phase = Connection::Phase::Reading;
    c.request_start = SteadyClock::now();
  }
  if (c.phase == Connection::Phase::Reading) frame(c);
}

void HttpLoop::Impl::frame(Connection& c) {
  if (!charge(c)) {
    refuse(c, 429, "server busy: too many request bytes in flight; retry later", "buffered_bytes", true);
    return;
  }
  const RequestFramer::State state = c.framer.feed(c.in);
  if (state == RequestFramer::State::Error) {
    const int status = c.framer.error_status();
    refuse(c, status, c.framer.error_message(), status == 413 ? "body_too_large" : "malformed", true);
    return;
  }
  if (state == RequestFramer::State::NeedMore) {
    if (c.framer.head_complete() && c.framer.expects_continue() && !c.continue_sent) {
      if (buffered_bytes + c.framer.announced_body_bytes() > options.max_buffered_bytes) {
        refuse(c, 429, "server busy: too many request bytes in flight; retry later", "buffered_bytes", true);
        return;
      }
      c.continue_sent = true;
      c.out += "HTTP/1.1 100 Continue\r\n\r\n";
      flush(c);
    }
    return;
  }
  dispatch(c);
}

void HttpLoop::Impl::dispatch(Connection& c) {
  std::string request = c.framer.request();
  c.in.erase(0, c.framer.consumed());
  // The request's bytes move from the connection to the task; a pipelined rest stays charged here.
  const size_t charge = std::min(c.budget_charged, c.framer.consumed());
  c.budget_charged -= charge;
  c.phase = Connection::Phase::Handling;
  const bool closing = draining.load() || c.framer.wants_close();
  ExchangeInfo info{c.peer, c.request_start, closing, [w = std::weak_ptr<LoopWaker>(waker), id = c.id] {
                      if (auto waker = w.lock()) waker->wake(id);
                    }, {}};
  if (handler.runs_inline(c.framer.method(), c.framer.target())) {
    buffered_bytes -= charge;
    apply(c, handler.handle(request, info));
    return;
  }
  auto state = std::make_shared<WorkerTask>();
  info.cancelled = [state] { return state->cancelled.load(); };
  auto task = [this, w = waker, id = c.id, request = std::move(request), info = std::move(info), charge,
               state]() mutable {
    if (!state->claim(WorkerTask::kRunning)) return;  // the loop dropped it, answered, and took back its bytes
    LoopWaker::Result r{id, handler.handle(request, info), charge};
    w->post(std::move(r));
  };
  if (!workers->try_post(std::move(task))) {
    buffered_bytes -= charge;
    refuse(c, 429, "server busy: the request queue is full; retry later", "queue_full", false);
    return;
  }
  tasks[c.id] = PendingTask{std::move(state), SteadyClock::now(), charge};
}

// The connection's task is no longer wanted: cancelled if it runs, never run if it still waits
// (then true: no answer will come from it).
bool HttpLoop::Impl::drop_task(uint64_t conn_id) {
  const auto it = tasks.find(conn_id);
  if (it == tasks.end()) return false;
  it->second.task->cancelled = true;
  const bool unrun = it->second.task->claim(WorkerTask::kDropped);
  if (unrun) buffered_bytes -= it->second.charge;
  tasks.erase(it);
  return unrun;
}

// Requests that waited for a worker past max_queue_time get their 429 now, whatever the workers
// are busy with, and are never run.
void HttpLoop::Impl::expire_queued(SteadyClock::time_point now) {
  if (options.max_queue_time.count() <= 0) return;
  std::vector<uint64_t> expired;
  for (auto& [id, p] : tasks) {
    if (now - p.queued_at > options.max_queue_time && p.task->claim(WorkerTask::kDropped)) {
      buffered_bytes -= p.charge;
      expired.push_back(id);
    }
  }
  for (uint64_t id : expired) {
    tasks.erase(id);
    refuse(*find(id), 429,
           "server busy: the request waited longer than " + std::to_string(options.max_queue_time.count()) +
               " ms for a worker; retry later",
           "queue_time", false);
  }
}

void HttpLoop::Impl::take_wakeups() {
  std::vector<uint64_t> ready;
  std::vector<LoopWaker::Result> results;
  waker->take(ready, results);
  for (LoopWaker::Result& r : results) {
    buffered_bytes -= r.charge;
    tasks.erase(r.conn_id);
    if (Connection* c = find(r.conn_id)) apply(*c, std::move(r.response));
  }
  for (uint64_t id : ready) {
    if (Connection* c = find(id)) pump(*c);
  }
  if (draining) {
    const auto now = SteadyClock::now();
    std::vector<uint64_t> idle;
    for (auto& [id, c] : conns) {
      if (idle_to_close_while_draining(*c, now)) idle.push_back(id);
    }
    for (uint64_t id : idle) close(*find(id));
  }
}

// A deferred answer's last bytes at shutdown: what it has ready, whole if it is done (its request
// may have finished a moment before the loop heard of it), else followed by its abandonment.
static std::string settle(DeferredResponse& d) {
  bool done = false;
  std::string out = d.advance(done);
  if (!done) out += d.abandon();
  return out;
}

void HttpLoop::Impl::apply(Connection& c, RoutedResponse r) {
  c.phase = Connection::Phase::Responding;
  c.close_after_write = c.close_after_write || r.close;
  if (stopping && r.deferred) {
    c.out += settle(*r.deferred);
    c.close_after_write = true;
  } else if (r.deferred) {
    c.deferred = std::move(r.deferred);
    pump(c);
    return;
  } else {
    c.out += r.bytes;
  }
  flush(c);
}

void HttpLoop::Impl::pump(Connection& c) {
  if (!c.deferred) return;
  bool done = false;
  c.out += c.deferred->advance(done);
  if (done) c.deferred.reset();
  flush(c);
}

void HttpLoop::Impl::flush(Connection& c) {
  if (c.has_output() && c.write_some() == Connection::Io::Closed) {
    close(c);
    return;
  }
  if (c.has_output() || c.deferred || c.phase != Connection::Phase::Responding) {
    update_interest(c);
    return;
  }
  if (c.close_after_write || draining || stopping) {
    c.start_lingering(SteadyClock::now() + kLinger);
    update_interest(c);
    return;
  }
  c.next_request();
  if (c.phase == Connection::Phase::Reading) {
    frame(c);  // a pipelined request was already here
  } else {
    update_interest(c);
  }
}

void HttpLoop::Impl::refuse(Connection& c, int status, const std::string& message, std::string_view reason, bool close) {
  buffered_bytes -= c.budget_charged;
  c.budget_charged = 0;
  c.phase = Connection::Phase::Responding;
  c.close_after_write = c.close_after_write || close;
  if (close) c.in.clear();
  c.out += handler.refusal(status, message, reason, c.close_after_write || draining);
  flush(c);
}

void HttpLoop::Impl::close(Connection& c) {
  drop_task(c.id);
  buffered_bytes -= c.budget_charged;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  conns.erase(c.id);  // closes the socket; a deferred answer is dropped, cancelling its requests
}

void HttpLoop::Impl::update_interest(Connection& c) {
  uint32_t want = EPOLLRDHUP;
  if (c.in.size() < read_cap(c)) want |= EPOLLIN;
  if (c.has_output() || c.tls_wants_write()) want |= EPOLLOUT;
  if (want == c.interest) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd, c.interest == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, c.fd, &ev);
  c.interest = want;
}

// Kept-alive connections between requests close when draining starts. One accepted that has not
// sent its first request yet gets the request timeout to send it, and an answer (503 for new
// work) rather than a reset.
bool HttpLoop::Impl::idle_to_close_while_draining(const Connection& c, SteadyClock::time_point now) const {
  return c.phase == Connection::Phase::Idle && !c.has_output() &&
         (c.requests_done > 0 || now - c.accepted > options.request_timeout);
}

void HttpLoop::Impl::check_timers(SteadyClock::time_point now) {
  last_timer_check = now;
  expire_queued(now);
  std::vector<uint64_t> expired, too_slow;
  for (auto& [id, c] : conns) {
    const bool idle = c->phase == Connection::Phase::Idle && !c->has_output();
    const bool stalled_write = c->has_output() && now - c->last_progress > options.idle_timeout;
    const bool lingered = c->phase == Connection::Phase::Lingering && now > c->linger_until;
    const bool drained = draining && idle_to_close_while_draining(*c, now);
    if ((idle && now - c->last_progress > options.idle_timeout) || drained || stalled_write || lingered) {
      expired.push_back(id);
    } else if (c->phase == Connection::Phase::Reading && now - c->request_start > options.request_timeout) {
      too_slow.push_back(id);
    } else if (c->handshaking() && now - c->accepted > options.request_timeout) {
      expired.push_back(id);  // no TLS yet to answer over
    }
  }
  for (uint64_t id : expired) close(*find(id));
  for (uint64_t id : too_slow) {
    refuse(*find(id), 408, "the request did not arrive within " + std::to_string(options.request_timeout.count()) + " ms",
           "timeout", true);
  }
}

// Stop accepting; every deferred answer ends now with its final bytes; idle connections close.
void HttpLoop::Impl::begin_stop() {
  stopping = true;
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
  ::close(listen_fd);
  std::vector<uint64_t> ids;
  for (auto& [id, c] : conns) ids.push_back(id);
  // What waits for a worker never runs and is answered now; what runs is cancelled and answers soon.
  for (uint64_t id : ids) {
    if (drop_task(id)) refuse(*find(id), 503, "the server is shutting down; retry elsewhere", "unavailable", true);
  }
  for (uint64_t id : ids) {
    Connection& c = *find(id);
    if (c.deferred) {
      c.out += settle(*c.deferred);
      c.deferred.reset();
      c.close_after_write = true;
      flush(c);
    } else if (c.phase == Connection::Phase::Idle || c.phase == Connection::Phase::Reading) {
      close(c);
    }
  }
}

}  // namespace flashserve
