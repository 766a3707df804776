#include "server/worker_pool.h"

#include <algorithm>

namespace flashserve {

WorkerPool::WorkerPool(int num_threads, size_t max_queued) : max_queued_(max_queued) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { run(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

bool WorkerPool::try_post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || tasks_.size() >= max_queued_) return false;
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

size_t WorkerPool::num_queued() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void WorkerPool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace flashserve
