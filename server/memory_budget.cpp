#include "server/memory_budget.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace flashserve {
namespace {

namespace fs = std::filesystem;

std::optional<int64_t> mem_available(const std::string& root) {
  std::ifstream meminfo(root + "/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

// A number of bytes from a cgroup file; nullopt for "max", a missing file, or v1's "no limit"
// (a huge page-rounded value).
std::optional<int64_t> read_bytes(const fs::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text) || text == "max") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used != text.size() || v < 0 || v >= (int64_t(1) << 60)) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The cgroup paths of this process, per /proc/self/cgroup: v2's "0::/path" and v1's memory
// controller line ("N:memory:/path" or with other controllers beside it).
struct CgroupPaths {
  std::optional<std::string> v2, v1_memory;
};

CgroupPaths own_cgroups(const std::string& root) {
  CgroupPaths paths;
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':');
    const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) paths.v2 = path;
    std::stringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) {
      if (c == "memory") paths.v1_memory = path;
    }
  }
  return paths;
}

// Every directory from the cgroup's own up to the mount point: a limit anywhere above applies too.
std::vector<fs::path> cgroup_dirs(const fs::path& mount, const std::string& path) {
  std::vector<fs::path> dirs;
  fs::path rel = fs::path(path).relative_path();
  for (;;) {
    dirs.push_back(mount / rel);
    if (rel.empty()) break;
    rel = rel.parent_path();
  }
  return dirs;
}

void lower_to(MemoryBudget& budget, const fs::path& dir, const char* limit_file, const char* usage_file) {
  const std::optional<int64_t> limit = read_bytes(dir / limit_file);
  if (!limit) return;
  const int64_t left = std::max<int64_t>(0, *limit - read_bytes(dir / usage_file).value_or(0));
  if (left < budget.bytes) budget = {left, (dir / limit_file).string()};
}

}  // namespace

MemoryBudget available_memory(const std::string& root) {
  const std::optional<int64_t> available = mem_available(root);
  if (!available) throw std::runtime_error("cannot read MemAvailable from " + root + "/proc/meminfo; pass --kv-cache-bytes");
  MemoryBudget budget{*available, "MemAvailable"};
  const CgroupPaths cg = own_cgroups(root);
  if (cg.v2) {
    for (const fs::path& dir : cgroup_dirs(root + "/sys/fs/cgroup", *cg.v2)) {
      lower_to(budget, dir, "memory.max", "memory.current");
    }
  }
  if (cg.v1_memory) {
    for (const fs::path& dir : cgroup_dirs(root + "/sys/fs/cgroup/memory", *cg.v1_memory)) {
      lower_to(budget, dir, "memory.limit_in_bytes", "memory.usage_in_bytes");
    }
  }
  return budget;
}

}  // namespace flashserve
