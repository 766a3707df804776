// How the HTTP event loop hears from other threads: worker results, and "this connection's
// deferred answer has bytes to send". One eventfd in the loop's epoll set; a signal is written only
// when none is pending, so a burst of wakeups costs one syscall. Shared (shared_ptr) with every
// callback that may outlive the loop: after close() they do nothing.
#pragma once
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>
#include "server/http_exchange.h"

namespace flashserve {

class LoopWaker {
 public:
  struct Result {
    uint64_t conn_id;
    RoutedResponse response;
    size_t charge;  // request bytes the task held against the buffer budget
  };

  LoopWaker() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
  }
  ~LoopWaker() { ::close(fd_); }
  int fd() const { return fd_; }

  void wake(uint64_t conn_id) {
    std::lock_guard lock(mu_);
    if (closed_) return;
    ready_.push_back(conn_id);
    signal();
  }
  // False once closed: the caller still owns the result (and drops it).
  bool post(Result r) {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    results_.push_back(std::move(r));
    signal();
    return true;
  }
  void nudge() {
    std::lock_guard lock(mu_);
    signal();
  }
  void take(std::vector<uint64_t>& ready, std::vector<Result>& results) {
    uint64_t count;
    while (::read(fd_, &count, sizeof(count)) > 0) {
    }
    std::lock_guard lock(mu_);
    ready.swap(ready_);
    results.swap(results_);
    signaled_ = false;
  }
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
  }

 private:
  void signal() {
    if (signaled_) return;
    signaled_ = true;
    const uint64_t one = 1;
    (void)!::write(fd_, &one, sizeof(one));
  }
  int fd_;
  std::mutex mu_;
  bool closed_ = false;
  bool signaled_ = false;
  std::vector<uint64_t> ready_;
  std::vector<Result> results_;
};

}  // namespace flashserve
