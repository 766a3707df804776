// The kernel threads: one per physical core by default (SMT siblings counted once), every item of
// a split run exactly once whatever the thread count, callers from several threads or from inside
// a job served, and idle workers asleep rather than spinning.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
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
    for (Split split : {Split::Even, Split::OneByOne}) {
      for (int64_t n : {0, 1, 2, 5, 7, 64, 1001}) {
        SCOPED_TRACE(std::to_string(threads) + " threads, n " + std::to_string(n));
        EXPECT_EQ(coverage(n, split), std::vector<int>(size_t(n), 1));
      }
    }
  }
  set_num_threads(0);
}

TEST(Threads, EvenSplitGivesEachThreadOneContiguousRun) {
  set_num_threads(3);
  std::vector<std::pair<int64_t, int64_t>> runs(8, {-1, -1});
  std::atomic<int> count{0};
  struct Ctx { std::vector<std::pair<int64_t, int64_t>>* runs; std::atomic<int>* count; } ctx{&runs, &count};
  run_parallel(
      10,
      [](void* c, int64_t begin, int64_t end) {
        auto& x = *static_cast<Ctx*>(c);
        (*x.runs)[size_t(x.count->fetch_add(1))] = {begin, end};
      },
      &ctx, Split::Even);
  runs.resize(size_t(count.load()));
  std::sort(runs.begin(), runs.end());
  EXPECT_EQ(runs, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 6}, {6, 10}}));
  set_num_threads(0);
}

TEST(Threads, CallersOnSeveralThreadsAndNestedCallsAllComplete) {
  set_num_threads(2);
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 200; ++round) {
        if (coverage(37, round % 2 ? Split::Even : Split::OneByOne) != std::vector<int>(37, 1)) wrong.fetch_add(1);
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
              Split::Even);
        }
      },
      &inner, Split::Even);
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
  EXPECT_EQ(coverage(100, Split::Even), std::vector<int>(100, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the workers' polling window
  const double before = cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_LT(cpu_seconds() - before, 0.05);
  set_num_threads(0);
}

}  // namespace
}  // namespace flashserve::kernels
