// Thread defaults: one kernel thread per physical core, SMT siblings counted once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <omp.h>
#include <unistd.h>

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
  EXPECT_LE(cores, omp_get_num_procs());
  set_num_threads(0);
  EXPECT_EQ(num_threads(), cores);
  set_num_threads(1);
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(0);
}

}  // namespace
}  // namespace flashserve::kernels
