// The kernel threads: a persistent pool of workers that spin briefly between jobs and then sleep
// on a futex (std::atomic::wait), so a decode step's back-to-back ops start without a wake-up, yet
// an idle engine leaves its cores to the HTTP and tokenizer threads.
#include "kernels/threads.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "kernels/cpu/parallel.h"

namespace flashserve::kernels {
namespace {

std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

bool read_int(const std::string& path, int& value) {
  std::ifstream in(path);
  return bool(in >> value);
}

// How long an idle worker polls for the next job before it sleeps. A decode step's ops follow each
// other within microseconds; the gap between steps (scheduling, sampling) is longer, and a sleeping
// worker's wake-up costs ~10-50 us once per step.
constexpr auto kSpin = std::chrono::microseconds(200);

inline void cpu_relax() { __builtin_ia32_pause(); }

// Split::Runs: runs per thread. More runs even out the threads' finishing times more finely (to
// within 1/8 of a thread's share here), at one atomic add a run.
constexpr int64_t kRunsPerThread = 8;

thread_local bool in_pool_job = false;

class Pool {
 public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    stop_.store(true);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  int size() const { return int(workers_.size()) + 1; }

  void run(int64_t n, RangeFn fn, void* ctx, Split split) {
    if (n <= 0) return;
    std::unique_lock<std::mutex> own(busy_, std::try_to_lock);
    if (workers_.empty() || in_pool_job || n == 1 || !own.owns_lock()) {
      fn(ctx, 0, n);
      return;
    }
    job_ = Job{fn, ctx, n, split};
    next_.store(0, std::memory_order_relaxed);
    running_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();  // a system call only when some worker sleeps
    share();
    // The caller's share is done; the others finish about now, so poll (yielding if one was preempted).
    for (int i = 0; running_.load(std::memory_order_acquire) != 0; ++i) {
      if (i < 4096) cpu_relax(); else std::this_thread::yield();
    }
  }

 private:
  struct Job {
    RangeFn fn = nullptr;
    void* ctx = nullptr;
    int64_t n = 0;
    Split split = Split::Runs;
  };

  void share() {
    in_pool_job = true;
    const Job& j = job_;
    const int64_t runs = kRunsPerThread * size();
    const int64_t run = j.split == Split::OneByOne ? 1 : (j.n + runs - 1) / runs;
    for (int64_t i; (i = next_.fetch_add(run, std::memory_order_relaxed)) < j.n;) j.fn(j.ctx, i, std::min(i + run, j.n));
    in_pool_job = false;
  }

  uint32_t next_generation(uint32_t seen) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1;; ++i) {
      const uint32_t g = generation_.load(std::memory_order_acquire);
      if (g != seen) return g;
      cpu_relax();
      if (i % 256 == 0 && std::chrono::steady_clock::now() - start > kSpin) break;
    }
    for (;;) {
      generation_.wait(seen, std::memory_order_acquire);
      const uint32_t g = generation_.load(std::memory_order_acquire);
      if (g != seen) return g;
    }
  }

  void work() {
    uint32_t seen = 0;
    for (;;) {
      seen = next_generation(seen);
      if (stop_.load()) return;
      share();
      running_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::vector<std::thread> workers_;
  std::mutex busy_;  // one job at a time; a second caller runs its loop alone
  Job job_;
  std::atomic<int64_t> next_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> running_{0};
  std::atomic<bool> stop_{false};
};

std::unique_ptr<Pool>& pool_slot() {
  static std::unique_ptr<Pool> pool;
  return pool;
}

Pool& pool() {
  static std::once_flag started;
  std::call_once(started, [] {
    if (!pool_slot()) pool_slot() = std::make_unique<Pool>(physical_cores());
  });
  return *pool_slot();
}

}  // namespace

void run_parallel(int64_t n, RangeFn fn, void* ctx, Split split) { pool().run(n, fn, ctx, split); }

int physical_cores(const std::string& sysfs_cpu_dir, const std::vector<int>& cpus) {
  std::set<std::pair<int, int>> cores;
  for (int c : cpus) {
    const std::string topology = sysfs_cpu_dir + "/cpu" + std::to_string(c) + "/topology/";
    int package = 0, core = 0;
    if (!read_int(topology + "physical_package_id", package) || !read_int(topology + "core_id", core)) {
      return int(cpus.size());  // no topology (some containers): every CPU counts
    }
    cores.insert({package, core});
  }
  return int(cores.size());
}

int physical_cores() {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) return int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  const int n = physical_cores("/sys/devices/system/cpu", cpus);
  return n > 0 ? n : int(cpus.size());
}

void set_num_threads(int n) {
  pool();  // the default pool exists first, so it never replaces this one later
  pool_slot().reset();
  pool_slot() = std::make_unique<Pool>(n > 0 ? n : physical_cores());
}

int num_threads() { return pool().size(); }

}  // namespace flashserve::kernels
