// The kernel threads: one per physical core by default (SMT siblings counted once), every item of
// a split run exactly once whatever the thread count, callers from several threads or from inside
// a job served, and idle workers asleep rather than spinning.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/threads.h"

namespace flashserve::kernels {
namespace {

namespace fs = std::filesystem;

// A sysfs-shaped tree: cpu -> (package, core).
fs::path fake_sysfs(const std::vector<std::pair<int, int>>& topology) {
  const fs::path dir = fs::temp_directory_path() / ("flashserve-sysfs-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (size_t c = 0; c < topology.size(); ++c) {
    const fs::path t = dir / ("cpu" + std::to_string(c)) / "topology";
    fs::create_directories(t);
    std::ofstream(t / "physical_package_id") << topology[c].first << "\n";
    std::ofstream(t / "core_id") << topology[c].second << "\n";
  }
  return dir;
}

TEST(Threads, SmtSiblingsCountOnce) {
  // Two packages of two cores, two threads each (cpu n and n + 4 are siblings).
  const fs::path dir = fake_sysfs({{0, 0}, {0, 1}, {1, 0}, {1, 1}, {0, 0}, {0, 1}, {1, 0}, {1, 1}});
  EXPECT_EQ(physical_cores(dir.string(), {0, 1, 2, 3, 4, 5, 6, 7}), 4);
  EXPECT_EQ(physical_cores(dir.string(), {0, 4}), 1);  // an affinity mask of one core's two threads
  EXPECT_EQ(physical_cores(dir.string(), {0, 2}), 2);  // same core id, different packages
  fs::remove_all(dir);
}

TEST(Threads, WithoutTopologyEveryCpuCounts) {
  EXPECT_EQ(physical_cores("/nonexistent-sysfs", {0, 1, 2}), 3);
}

TEST(Threads, DefaultIsThePhysicalCoreCount) {
  const int cores = physical_cores();
  EXPECT_GE(cores, 1);
  EXPECT_LE(cores, sysconf(_SC_NPROCESSORS_ONLN));
  set_num_threads(0);
  EXPECT_EQ(num_threads(), cores);
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(0);
}

// Counts how often run_parallel hands each index of [0, n) to the body.
std::vector<int> coverage(int64_t n, Split split) {
  std::vector<std::atomic<int>> hits(size_t(std::max<int64_t>(n, 1)));
  run_parallel(
      n,
      [](void* ctx, int64_t begin, int64_t end) {
        auto& h = *static_cast<std::vector<std::atomic<int>>*>(ctx);
        for (int64_t i = begin; i < end; ++i) h[size_t(i)].fetch_add(1);
      },
      &hits, split);
  std::vector<int> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(hits[size_t(i)].load());
  return out;
}

TEST(Threads, EveryItemRunsExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    for (Split split : {Split::Runs, Split::OneByOne}) {
      for (int64_t n : {0, 1, 2, 5, 7, 64, 1001}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, n " + std::to_string(n));
        EXPECT_EQ(coverage(n, split), std::vector<int>(size_t(n), 1));
      }
    }
  }
  set_num_threads(0);
}

// The runs a body is handed, in the order they were taken, and by which thread.
struct Taken {
  std::mutex m;
  std::vector<std::pair<int64_t, int64_t>> runs;
  std::vector<std::thread::id> by;
  void add(int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(m);
    runs.push_back({begin, end});
    by.push_back(std::this_thread::get_id());
  }
};

TEST(Threads, RunsAreContiguousAndCoverEveryItemOnce) {
  set_num_threads(2);
  Taken taken;
  run_parallel(
      1000, [](void* c, int64_t begin, int64_t end) { static_cast<Taken*>(c)->add(begin, end); }, &taken, Split::Runs);
  std::sort(taken.runs.begin(), taken.runs.end());
  ASSERT_EQ(taken.runs.size(), 16u);  // eight runs a thread
  for (size_t i = 0; i < taken.runs.size(); ++i) {
    EXPECT_EQ(taken.runs[i].first, int64_t(63 * i));
    EXPECT_EQ(taken.runs[i].second, std::min<int64_t>(63 * int64_t(i + 1), 1000));
  }
  set_num_threads(0);
}

// A thread held up (here: the caller's first run waits until everything else is done) leaves its
// share to the others instead of keeping a fixed half of the items, which would wait on it.
TEST(Threads, AHeldUpThreadLeavesTheRestToTheOthers) {
  set_num_threads(2);
  struct Ctx {
    Taken taken;
    std::thread::id caller = std::this_thread::get_id();
    std::atomic<int64_t> done_elsewhere{0};
    std::atomic<bool> caller_started{false};
  } ctx;
  constexpr int64_t kItems = 64;  // runs of four
  run_parallel(
      kItems,
      [](void* c, int64_t begin, int64_t end) {
        auto& x = *static_cast<Ctx*>(c);
        x.taken.add(begin, end);
        // The waits are bounded so that a fixed split fails the expectations below rather than hanging.
        const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        if (std::this_thread::get_id() != x.caller) {
          // (so that the caller has taken its first run before the others take them all)
          while (!x.caller_started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
          x.done_elsewhere.fetch_add(end - begin);
          return;
        }
        x.caller_started.store(true);
        while (x.done_elsewhere.load() < kItems - (end - begin) && std::chrono::steady_clock::now() < give_up) {
          std::this_thread::yield();
        }
      },
      &ctx, Split::Runs);
  int64_t by_caller = 0;
  for (size_t i = 0; i < ctx.taken.runs.size(); ++i) {
    if (ctx.taken.by[i] == ctx.caller) by_caller += ctx.taken.runs[i].second - ctx.taken.runs[i].first;
  }
  EXPECT_EQ(by_caller, 4);
  EXPECT_EQ(ctx.done_elsewhere.load(), kItems - 4);
  set_num_threads(0);
}

TEST(Threads, CallersOnSeveralThreadsAndNestedCallsAllComplete) {
  set_num_threads(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        if (coverage(37, round % 2 ? Split::Runs : Split::OneByOne) != std::vector<int>(37, 1)) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  // A body that splits again runs its inner loop on its own thread.
  std::atomic<int> inner{0};
  run_parallel(
      4,
      [](void* ctx, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          run_parallel(
              5, [](void* c, int64_t b, int64_t e) { static_cast<std::atomic<int>*>(c)->fetch_add(int(e - b)); }, ctx,
              Split::Runs);
        }
      },
      &inner, Split::Runs);
  EXPECT_EQ(inner.load(), 20);
  set_num_threads(0);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Four workers that kept polling would burn ~0.8 s of CPU in these 200 ms; sleeping ones, nothing.
TEST(Threads, IdleWorkersSleep) {
  set_num_threads(5);
  EXPECT_EQ(coverage(100, Split::Runs), std::vector<int>(100, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the workers' polling window
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(cpu_seconds() - before, 0.05);
  set_num_threads(0);
}

}  // namespace
}  // namespace flashserve::kernels
