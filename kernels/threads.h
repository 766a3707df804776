#pragma once
#include <string>
#include <vector>

namespace flashserve::kernels {

// Worker threads the CPU kernels split output rows across; n <= 0: one per physical core.
void set_num_threads(int n);
int num_threads();

// Physical cores among the CPUs this process may run on (sched_getaffinity), counted as distinct
// (package, core) pairs in sysfs: SMT siblings share a core's vector units, so a second thread per
// core only slows a matmul down. Falls back to the CPUs allowed when sysfs says nothing.
int physical_cores();
// The same count read from `sysfs_cpu_dir` (a /sys/devices/system/cpu layout) for the CPUs listed.
int physical_cores(const std::string& sysfs_cpu_dir, const std::vector<int>& cpus);

}  // namespace flashserve::kernels
