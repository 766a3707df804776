// How much memory this process may still take: the host's MemAvailable, lowered by every cgroup
// memory limit above us (v2 memory.max, or v1 memory.limit_in_bytes) minus what the cgroup already
// uses. A container sees the host's /proc/meminfo, so sizing the KV cache from MemAvailable alone
// would pick a cache the container's limit then kills us for.
#pragma once
#include <cstdint>
#include <string>

namespace flashserve {

struct MemoryBudget {
  int64_t bytes;       // what may still be allocated
  std::string source;  // what set it: "MemAvailable" or the cgroup file that was tighter
};

// `root` prefixes /proc and /sys (tests point it at a fake tree). Throws std::runtime_error when
// MemAvailable cannot be read.
MemoryBudget available_memory(const std::string& root = "");

}  // namespace flashserve
