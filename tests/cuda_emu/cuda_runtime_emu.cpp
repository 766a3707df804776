// The part of the CUDA runtime our kernels and their tests call, over host memory: the emulated
// test binaries link this instead of libcudart. Every stream is synchronous; a captured stream
// records its launches and copies into a graph that cudaGraphLaunch replays, which is what CUDA
// graphs promise the code that uses them. "Device" memory is host memory, so a kernel that reads a
// host pointer by mistake is not caught here; one that runs past the end of a device allocation is
// (see cudaMalloc).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/cuda_emu/cuda_emu.h"

struct CUstream_st {
  bool capturing = false;
  std::vector<std::function<void()>> captured;
};
struct CUgraph_st {
  std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> ops;
};

namespace flashserve::cuda_emu {
void run_launch(dim3 grid, dim3 block, size_t dynamic_shared_bytes, const std::function<void()>& body);

namespace {

// What the emulator reports as its device: an H100's limits, with a small memory so that
// "fraction of free memory" sizing stays within a test machine's RAM.
constexpr size_t kDeviceBytes = size_t(2) << 30;
constexpr int kSharedOptin = 227 * 1024;

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> op) {
  if (stream != nullptr && stream->capturing) stream->captured.push_back(std::move(op));
  else op();
}

void submit(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, std::function<void()> body) {
  enqueue(stream, [=] { run_launch(grid, block, smem, body); });
}

}  // namespace flashserve::cuda_emu

using flashserve::cuda_emu::enqueue;

cudaError_t cudaGetDeviceCount(int* count) {
  *count = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::strcpy(prop->name, "flashserve CUDA emulator (host)");
  prop->totalGlobalMem = flashserve::cuda_emu::kDeviceBytes;
  prop->sharedMemPerBlock = 48 * 1024;
  prop->sharedMemPerBlockOptin = flashserve::cuda_emu::kSharedOptin;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->multiProcessorCount = 132;
  prop->major = 9;
  prop->minor = 0;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device != 0) return cudaErrorInvalidDevice;
  if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return cudaErrorInvalidValue;
  *value = flashserve::cuda_emu::kSharedOptin;
  return cudaSuccess;
}
cudaError_t cudaFuncSetAttribute(const void*, cudaFuncAttribute attr, int value) {
  if (attr == cudaFuncAttributeMaxDynamicSharedMemorySize && (value < 0 || value > flashserve::cuda_emu::kSharedOptin))
    return cudaErrorInvalidValue;
  return cudaSuccess;
}

// A bad launch throws from the launch itself, so nothing is left to report afterwards.
cudaError_t cudaGetLastError() { return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "cuda_emu error";
  }
}

namespace flashserve::cuda_emu {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kPoisonedBytes = size_t(256) << 20;

// Each device allocation's mapping: the pages the allocation ends on, then an inaccessible guard
// page.
struct Mapping {
  char* base;
  size_t bytes;
};
std::mutex allocations_mu;
std::map<void*, Mapping> allocations;

// A kernel that touched a guard page: say what it means before the usual crash.
void on_segfault(int, siginfo_t* info, void*) {
  static const char what[] =
      "cuda_emu: invalid memory access (a guard page after a device allocation: a read or write past "
      "its end, as compute-sanitizer's memcheck would report)\n";
  bool guard = false;
  for (const auto& [user, m] : allocations) {  // no lock: the process is about to die anyway
    const char* at = static_cast<const char*>(info->si_addr);
    guard |= at >= m.base + m.bytes - kPage && at < m.base + m.bytes;
  }
  if (guard) (void)!write(STDERR_FILENO, what, sizeof(what) - 1);
  signal(SIGSEGV, SIG_DFL);  // returning re-runs the access, which now kills the process as usual
}

void install_segfault_note() {
  static const bool installed = [] {
    struct sigaction sa{};
    sa.sa_sigaction = on_segfault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    return true;
  }();
  (void)installed;
}

}  // namespace
}  // namespace flashserve::cuda_emu

// The allocation ends (rounded up to cudaMalloc's 256-byte alignment) right against a page that
// cannot be read or written, so a kernel running past the end of its buffer faults at the first
// byte beyond the rounding instead of quietly reading its neighbour: the part of memcheck a host
// can do for free. Pages are reserved, not committed (MAP_NORESERVE), as the KV pool is large.
cudaError_t cudaMalloc(void** p, size_t bytes) {
  using namespace flashserve::cuda_emu;
  *p = nullptr;
  if (bytes == 0) return cudaSuccess;
  install_segfault_note();
  const size_t used = (bytes + 255) / 256 * 256;
  const size_t span = (used + kPage - 1) / kPage * kPage + kPage;
  void* base = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return cudaErrorMemoryAllocation;
  char* bytes_at = static_cast<char*>(base);
  if (mprotect(bytes_at + span - kPage, kPage, PROT_NONE) != 0) {
    munmap(base, span);
    return cudaErrorMemoryAllocation;
  }
  *p = bytes_at + span - kPage - used;
  // A GPU hands out memory with whatever was there; fresh pages here would read as zeros and hide
  // a kernel that reads before anything wrote. All ones bytes are NaN in f32, f16 and bf16 and -1
  // as an integer, so such a read shows in the results. (Only the first 256 MiB: the KV pool can be
  // gigabytes that the tests never touch.)
  std::memset(*p, 0xff, std::min(bytes, kPoisonedBytes));
  std::lock_guard lock(allocations_mu);
  allocations[*p] = {bytes_at, span};
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  using namespace flashserve::cuda_emu;
  if (p == nullptr) return cudaSuccess;
  std::lock_guard lock(allocations_mu);
  const auto it = allocations.find(p);
  if (it == allocations.end()) return cudaErrorInvalidValue;
  munmap(it->second.base, it->second.bytes);
  allocations.erase(it);
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = *total_bytes = flashserve::cuda_emu::kDeviceBytes;
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind, cudaStream_t stream) {
  enqueue(stream, [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t stream) {
  enqueue(stream, [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream != nullptr && stream->capturing ? cudaErrorStreamCaptureUnsupported : cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  *stream = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) { return cudaStreamCreate(stream); }
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  if (stream == nullptr || stream->capturing) return cudaErrorIllegalState;
  stream->capturing = true;
  stream->captured.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (stream == nullptr || !stream->capturing) return cudaErrorIllegalState;
  stream->capturing = false;
  *graph = new CUgraph_st{std::move(stream->captured)};
  stream->captured.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status = stream != nullptr && stream->capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = new CUgraphExec_st{graph->ops};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  for (const auto& op : exec->ops) enqueue(stream, op);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
