// KV sizing reads the host's MemAvailable and every cgroup limit above the process, over a fake
// /proc and /sys tree: a container's limit, not the host's free memory, bounds the cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/memory_budget.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;

class MemoryBudgetTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("flashserve-membudget-" + std::to_string(::getpid()) + "-" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    write("proc/meminfo", "MemTotal: 65536000 kB\nMemAvailable:   32000000 kB\nBuffers: 1 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / rel).parent_path());
    std::ofstream(root_ / rel) << text;
  }
  MemoryBudget read() const { return available_memory(root_.string()); }
  fs::path root_;
};

TEST_F(MemoryBudgetTree, WithoutCgroupLimitsItIsMemAvailable) {
  write("proc/self/cgroup", "0::/\n");
  write("sys/fs/cgroup/memory.max", "max\n");
  const MemoryBudget b = read();
  EXPECT_EQ(b.bytes, int64_t(32000000) * 1024);
  EXPECT_EQ(b.source, "MemAvailable");
}

TEST_F(MemoryBudgetTree, CgroupV2LimitMinusUsage) {
  write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  write("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "4294967296\n");  // 4 GiB
  write("sys/fs/cgroup/kubepods/pod1/ctr/memory.current", "1073741824\n");
  const MemoryBudget b = read();
  EXPECT_EQ(b.bytes, int64_t(3) << 30);
  EXPECT_NE(b.source.find("memory.max"), std::string::npos);
}

TEST_F(MemoryBudgetTree, TightestLimitUpTheTreeWins) {
  write("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  write("sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n");
  write("sys/fs/cgroup/kubepods/pod1/memory.max", "2147483648\n");  // the pod's limit
  write("sys/fs/cgroup/kubepods/pod1/memory.current", "0\n");
  EXPECT_EQ(read().bytes, int64_t(2) << 30);
}

TEST_F(MemoryBudgetTree, CgroupV1Limit) {
  write("proc/self/cgroup", "5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n");
  write("sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "536870912\n");  // 512 MiB
  write("sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "268435456\n");
  EXPECT_EQ(read().bytes, int64_t(256) << 20);
}

// Inside a container without a cgroup namespace, the path names the host's hierarchy while the
// container sees its own cgroup at the mount point: walking up still finds the limit there.
TEST_F(MemoryBudgetTree, LimitAtTheMountPointIsFound) {
  write("proc/self/cgroup", "0::/system.slice/docker-abc.scope\n");
  write("sys/fs/cgroup/memory.max", "1073741824\n");
  write("sys/fs/cgroup/memory.current", "0\n");
  EXPECT_EQ(read().bytes, int64_t(1) << 30);
}

TEST_F(MemoryBudgetTree, MissingMeminfoIsAClearError) {
  fs::remove(root_ / "proc/meminfo");
  try {
    read();
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--kv-cache-bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace flashserve
