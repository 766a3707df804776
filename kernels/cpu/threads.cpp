#include "kernels/threads.h"

#include <omp.h>
#include <sched.h>

#include <fstream>
#include <set>
#include <utility>

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

}  // namespace

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
  if (cpus.empty()) return omp_get_num_procs();
  const int n = physical_cores("/sys/devices/system/cpu", cpus);
  return n > 0 ? n : int(cpus.size());
}

void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : physical_cores()); }

int num_threads() { return omp_get_max_threads(); }

}  // namespace flashserve::kernels
