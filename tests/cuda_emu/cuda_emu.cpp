// The fiber scheduler behind cuda_emu.h. A block's threads are fibers on the calling OS thread;
// each runs until it reaches __syncthreads, a warp collective or its end. When every fiber waits,
// the scheduler completes what is complete (a warp collective once all the lanes its mask names
// have reached it, then a block barrier once every live thread has) and resumes those fibers.
// Running lanes one at a time is a legal schedule for code without data races, and anything that
// can never complete is reported instead of hanging.
#include "tests/cuda_emu/cuda_emu.h"

#include <sys/mman.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#if !defined(__x86_64__)
#error "cuda_emu switches fibers with x86-64 assembly"
#endif

// Saves the callee-saved registers on the current stack, stores its pointer in *save and continues
// on the stack next points to (one that this function saved, or a new fiber's, set up below). No
// system call, unlike swapcontext, whose signal-mask round trip dominated the emulator's time.
extern "C" void flashserve_emu_switch(void** save, void* next);
asm(R"(
  .text
  .globl flashserve_emu_switch
  .type flashserve_emu_switch, @function
flashserve_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size flashserve_emu_switch, .-flashserve_emu_switch
)");

namespace flashserve::cuda_emu {
namespace {

constexpr int kWarpSize = 32;
constexpr size_t kStackBytes = 256 * 1024;

enum class State { Runnable, AtBarrier, AtWarpOp, Done };

struct Lane {
  void* stack_pointer = nullptr;  // where the fiber resumes
  ThreadContext builtins;
  State state = State::Runnable;
  WarpOp op = WarpOp::Sync;
  unsigned mask = 0;
  uint64_t value = 0;
  int arg = 0;
  int width = kWarpSize;
  uint64_t result = 0;
  // WarpOp::Mma: this lane's fragments.
  bool bf16 = false;
  float* c = nullptr;
  const uint32_t* a = nullptr;
  const uint32_t* b = nullptr;
};

// The stacks for the largest block seen so far, reserved once and reused by every later block.
class Stacks {
 public:
  ~Stacks() {
    if (base_ != nullptr) munmap(base_, bytes_);
  }
  char* at(size_t i, size_t count) {
    if (count * kStackBytes > bytes_) {
      if (base_ != nullptr) munmap(base_, bytes_);
      bytes_ = count * kStackBytes;
      void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::runtime_error("cuda_emu: cannot reserve fiber stacks");
      base_ = static_cast<char*>(p);
    }
    return base_ + i * kStackBytes;
  }

 private:
  char* base_ = nullptr;
  size_t bytes_ = 0;
};

struct BlockRun {
  std::vector<Lane> lanes;
  void* scheduler = nullptr;
  size_t current = 0;
  bool reverse = false;  // this block runs its threads last to first
  const std::function<void()>* body = nullptr;
  std::vector<unsigned char> dynamic_shared;
  std::exception_ptr error;  // thrown by a fiber, rethrown by the scheduler
};

thread_local BlockRun* running = nullptr;
thread_local Stacks stacks;

Lane& current_lane() {
  if (running == nullptr) throw std::logic_error("cuda_emu: device code called outside a launch");
  return running->lanes[running->current];
}

// Lane i's place in the block's running order.
size_t order(const BlockRun& b, size_t i) { return b.reverse ? b.lanes.size() - 1 - i : i; }

// The first runnable lane at or after place k of the running order, or lanes.size().
size_t runnable_from(const BlockRun& b, size_t k) {
  for (; k < b.lanes.size(); ++k)
    if (const size_t i = order(b, k); b.lanes[i].state == State::Runnable) return i;
  return b.lanes.size();
}

// Suspends the current lane and goes straight on to the next runnable one, or back to the scheduler
// once every lane has had its turn (or a lane has thrown): one switch per turn instead of two.
void end_turn(Lane& lane) {
  BlockRun& b = *running;
  const size_t next = b.error ? b.lanes.size() : runnable_from(b, order(b, b.current) + 1);
  if (next == b.lanes.size()) {
    flashserve_emu_switch(&lane.stack_pointer, b.scheduler);
  } else {
    b.current = next;
    flashserve_emu_switch(&lane.stack_pointer, b.lanes[next].stack_pointer);
  }
}

[[noreturn]] void fiber_main() {
  // An exception must not unwind past this frame: below it is no caller, only the fake return
  // address new_fiber_stack put there.
  try {
    (*running->body)();
  } catch (...) {
    running->error = std::current_exception();
  }
  Lane& lane = running->lanes[running->current];
  lane.state = State::Done;
  end_turn(lane);
  __builtin_unreachable();  // a finished fiber is never resumed
}

// A new fiber's stack as flashserve_emu_switch leaves a suspended one: six saved registers, then
// the address to return to (fiber_main), then a slot standing for fiber_main's own return address
// so that it starts with the stack alignment of a called function.
void* new_fiber_stack(char* stack) {
  auto* top = reinterpret_cast<uintptr_t*>(stack + kStackBytes);
  *--top = 0;
  *--top = reinterpret_cast<uintptr_t>(&fiber_main);
  for (int i = 0; i < 6; ++i) *--top = 0;
  return top;
}

[[noreturn]] void fail(const std::string& what, dim3 block) {
  throw std::runtime_error("cuda_emu: block (" + std::to_string(block.x) + "," + std::to_string(block.y) + "," +
                           std::to_string(block.z) + "): " + what);
}

// The lane a shuffle reads, or -1 for "keep your own value".
int shuffle_source(const Lane& l, int lane) {
  const int segment = lane / l.width * l.width;
  switch (l.op) {
    case WarpOp::Shfl: return segment + (l.arg % l.width + l.width) % l.width;
    case WarpOp::ShflXor: {
      const int src = lane ^ l.arg;
      return src >= segment && src < segment + l.width ? src : -1;
    }
    case WarpOp::ShflUp: return lane - l.arg >= segment ? lane - l.arg : -1;
    case WarpOp::ShflDown: return lane + l.arg < segment + l.width ? lane + l.arg : -1;
    default: return -1;
  }
}

float element16(uint32_t reg, int half, bool bf16) {
  const uint16_t bits = uint16_t(reg >> (16 * half));
  return bf16 ? std::bit_cast<float>(uint32_t(bits) << 16) : __half2float(__ushort_as_half(bits));
}

// D = A B + C over the warp's fragments, written back into each lane's c.
void complete_mma(Lane* warp) {
  double a[16][16], b[16][8], c[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const Lane& l = warp[lane];
    const int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      a[g][2 * t + e] = element16(l.a[0], e, l.bf16);
      a[g + 8][2 * t + e] = element16(l.a[1], e, l.bf16);
      a[g][2 * t + 8 + e] = element16(l.a[2], e, l.bf16);
      a[g + 8][2 * t + 8 + e] = element16(l.a[3], e, l.bf16);
      b[2 * t + e][g] = element16(l.b[0], e, l.bf16);
      b[2 * t + 8 + e][g] = element16(l.b[1], e, l.bf16);
      c[g][2 * t + e] = l.c[e];
      c[g + 8][2 * t + e] = l.c[2 + e];
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i / 2), col = 2 * t + i % 2;
      double d = c[row][col];
      for (int k = 0; k < 16; ++k) d += a[row][k] * b[k][col];
      warp[lane].c[i] = float(d);
    }
  }
}

// Completes warp w's collective if every lane it names has reached it; returns whether it did.
bool complete_warp_op(BlockRun& b, size_t w, dim3 block) {
  const size_t first = w * kWarpSize, end = std::min(b.lanes.size(), first + kWarpSize);
  size_t leader = end;
  for (size_t i = first; i < end; ++i)
    if (b.lanes[i].state == State::AtWarpOp) {
      leader = i;
      break;
    }
  if (leader == end) return false;
  const Lane& lead = b.lanes[leader];
  const auto where = [&] { return "warp " + std::to_string(w) + ": "; };
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(lead.mask >> lane & 1u)) continue;
    const size_t i = first + lane;
    if (i >= end) fail(where() + "mask names lane " + std::to_string(lane) + ", which the block does not have", block);
    const Lane& l = b.lanes[i];
    if (l.state == State::Done) fail(where() + "mask names lane " + std::to_string(lane) + ", which has exited", block);
    if (l.state != State::AtWarpOp) return false;  // still on its way, or waiting at a barrier (deadlock caught later)
    if (l.op != lead.op || l.mask != lead.mask || l.bf16 != lead.bf16)
      fail(where() + "lanes " + std::to_string(leader - first) + " and " + std::to_string(lane) +
               " wait at different warp collectives",
           block);
  }
  if (lead.op == WarpOp::Mma) {
    if (lead.mask != 0xffffffffu) fail(where() + "mma.sync needs every lane of the warp", block);
    complete_mma(&b.lanes[first]);
    for (size_t i = first; i < end; ++i) b.lanes[i].state = State::Runnable;
    return true;
  }
  uint64_t match_or_ballot = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(lead.mask >> lane & 1u)) continue;
    Lane& l = b.lanes[first + lane];
    if (lead.op == WarpOp::Ballot && l.value != 0) match_or_ballot |= 1ull << lane;
    if (lead.op == WarpOp::MatchAny) {
      uint64_t peers = 0;
      for (int other = 0; other < kWarpSize; ++other)
        if ((lead.mask >> other & 1u) && b.lanes[first + other].value == l.value) peers |= 1ull << other;
      l.result = peers;
    }
    const int src = shuffle_source(l, lane);
    if (src >= 0 && !(lead.mask >> src & 1u))
      fail(where() + "lane " + std::to_string(lane) + " reads lane " + std::to_string(src) +
               ", which its mask leaves out",
           block);
    if (lead.op == WarpOp::Shfl || lead.op == WarpOp::ShflXor || lead.op == WarpOp::ShflUp ||
        lead.op == WarpOp::ShflDown)
      l.result = src >= 0 ? b.lanes[first + src].value : l.value;
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!(lead.mask >> lane & 1u)) continue;
    Lane& l = b.lanes[first + lane];
    if (lead.op == WarpOp::Ballot) l.result = match_or_ballot;
    l.state = State::Runnable;
  }
  return true;
}

std::string describe_deadlock(const BlockRun& b) {
  size_t at_barrier = 0, at_warp = 0, done = 0;
  for (const Lane& l : b.lanes) {
    at_barrier += l.state == State::AtBarrier;
    at_warp += l.state == State::AtWarpOp;
    done += l.state == State::Done;
  }
  return "deadlock: " + std::to_string(at_barrier) + " threads wait at __syncthreads, " + std::to_string(at_warp) +
         " at a warp collective, " + std::to_string(done) + " have exited";
}

// Threads run one at a time from one barrier to the next, in thread order or its reverse. Blocks
// alternate the two, so a thread that reads shared memory another one writes without a barrier in
// between sees the new value in one block and the stale one in the next, and a kernel with such a
// race gives results that its test notices: a cheap stand-in for compute-sanitizer's racecheck.
void run_block(BlockRun& b, dim3 grid, dim3 block, uint3 block_idx, bool reverse) {
  b.reverse = reverse;
  const size_t n = size_t(block.x) * block.y * block.z;
  b.lanes.assign(n, Lane{});
  for (size_t i = 0; i < n; ++i) {
    Lane& l = b.lanes[i];
    const uint3 thread{unsigned(i % block.x), unsigned(i / block.x % block.y),
                       unsigned(i / (size_t(block.x) * block.y))};
    l.builtins = {thread, block_idx, block, grid};
    l.stack_pointer = new_fiber_stack(stacks.at(i, n));
  }
  const dim3 where(block_idx.x, block_idx.y, block_idx.z);
  for (;;) {
    // One turn for every runnable lane; each hands over to the next (end_turn).
    if (const size_t first = runnable_from(b, 0); first < n) {
      b.current = first;
      flashserve_emu_switch(&b.scheduler, b.lanes[first].stack_pointer);
      if (b.error) std::rethrow_exception(b.error);
    }
    bool resumed = false;
    for (size_t w = 0; w * kWarpSize < n; ++w) resumed |= complete_warp_op(b, w, where);
    if (resumed) continue;
    size_t done = 0, at_barrier = 0;
    for (const Lane& l : b.lanes) {
      done += l.state == State::Done;
      at_barrier += l.state == State::AtBarrier;
    }
    if (done == n) return;
    if (done + at_barrier != n) fail(describe_deadlock(b), where);
    // Threads that have exited count as arrived, as on the hardware.
    for (Lane& l : b.lanes)
      if (l.state == State::AtBarrier) l.state = State::Runnable;
  }
}

void check_launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > 1024 || grid.y > 65535 ||
      grid.z > 65535 || block.z > 64)
    throw std::runtime_error("cuda_emu: invalid launch configuration (grid " + std::to_string(grid.x) + "x" +
                             std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block of " +
                             std::to_string(threads) + " threads)");
  if (dynamic_shared_bytes > 227 * 1024)
    throw std::runtime_error("cuda_emu: " + std::to_string(dynamic_shared_bytes) +
                             " bytes of dynamic shared memory exceed the 227 KiB a block can have");
}

// Parks the calling lane at a warp collective until the scheduler completes it.
void arrive(Lane& l, WarpOp op, unsigned mask) {
  l.op = op;
  l.mask = mask;
  l.state = State::AtWarpOp;
  end_turn(l);
}

}  // namespace

const ThreadContext& this_thread() { return current_lane().builtins; }

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width) {
  Lane& l = current_lane();
  if (width <= 0 || width > kWarpSize || (width & (width - 1)) != 0)
    throw std::logic_error("cuda_emu: shuffle width must be a power of two up to 32");
  const int lane = int(running->current % kWarpSize);
  if (!(mask >> lane & 1u)) throw std::logic_error("cuda_emu: a lane calls a warp collective its mask leaves out");
  l.bf16 = false;
  l.value = value;
  l.arg = arg;
  l.width = width;
  arrive(l, op, mask);
  return l.result;
}

void mma_16x8x16(bool bf16, float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  Lane& l = current_lane();
  l.bf16 = bf16;
  l.c = c;
  l.a = a;
  l.b = b;
  arrive(l, WarpOp::Mma, 0xffffffffu);
}

void sync_threads() {
  Lane& l = current_lane();
  l.state = State::AtBarrier;
  end_turn(l);
}

void* dynamic_shared() {
  if (running == nullptr) throw std::logic_error("cuda_emu: device code called outside a launch");
  return running->dynamic_shared.data();
}

void run_launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body) {
  // The emulated kernels are built with -mfma (CMakeLists.txt); say so rather than die of SIGILL.
  static const bool has_fma = __builtin_cpu_supports("fma");
  if (!has_fma) throw std::runtime_error("cuda_emu: the emulated kernels need a CPU with FMA instructions");
  check_launch(grid, block, dynamic_shared_bytes);
  if (running != nullptr) throw std::logic_error("cuda_emu: a kernel launched from device code");
  BlockRun b;
  b.body = &body;
  b.dynamic_shared.assign(dynamic_shared_bytes + 16, 0xcd);  // garbage, as the hardware leaves it
  running = &b;
  try {
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) run_block(b, grid, block, uint3{x, y, z}, (x + y + z) % 2 == 1);
  } catch (...) {
    running = nullptr;
    throw;
  }
  running = nullptr;
}

}  // namespace flashserve::cuda_emu
