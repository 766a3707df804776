// A fixed set of threads running tasks from a bounded queue. A full queue refuses the task at once
// (the caller answers 429) instead of letting it wait unseen: nothing queues without a limit.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flashserve {

class WorkerPool {
 public:
  WorkerPool(int num_threads, size_t max_queued);
  ~WorkerPool();  // runs what is queued, then joins
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (and the task is dropped) when max_queued tasks are already waiting.
  bool try_post(std::function<void()> task);
  size_t num_queued() const;

 private:
  void run();

  const size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace flashserve
