// bench_cuda_ops: GPU timings of the CUDA ops (kernels/cuda), one line of key=value fields per case.
//
// First the device and its two measured ceilings: copy bandwidth (a large device-to-device copy,
// bytes read + bytes written) and a bf16 GEMM through cuBLASLt (8192^3, f32 accumulation). Every
// later case reports its time (median / p95 / p99 / min over the timed runs, microseconds), the
// device memory it raised (peak_mib), the bytes it must move and the flops it must do, the rates
// those give (gbps = 1e9 bytes/s, tflops = 1e12 flop/s) and their fractions of the measured
// ceilings (frac_bw, frac_tflops). Targets that need no other program are judged here
// (target / target_met); those against PyTorch are judged by compare.py. See bench/README.md.
//
//   bench_cuda_ops [--quick] [--filter SUBSTR] [--runs N] [--warmup N] [--max-seconds S]
//                  [--no-flush] [--list]
//
// Exit codes: 0 all cases ran, 1 some case failed (its line says status=error), 2 no CUDA device
// or bad arguments.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/bench_harness.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "kernels/moe_routing.h"
#include "kernels/paged_attention.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/sampling.h"
#include "kernels/swiglu.h"

namespace fk = flashserve::kernels;
namespace fb = flashserve::bench;

#define BENCH_CUBLAS_CHECK(stmt)                                                                   \
  do {                                                                                             \
    const cublasStatus_t bench_st_ = (stmt);                                                       \
    if (bench_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      throw std::runtime_error(std::string(#stmt) + " failed: cublas status " +                    \
                               std::to_string(int(bench_st_)));                                    \
  } while (0)

namespace {

// ---------------------------------------------------------------------------------------------
// Device helpers: random fills (never zeros: they hide indexing bugs and can run faster), the L2
// flush, and output checks.

__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ float uniform01(uint64_t seed, uint64_t i) {
  return float(mix64(seed * 0x632BE59BD9B4E019ull + i) >> 40) * (1.0f / 16777216.0f);
}
__device__ __forceinline__ void store_as(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_as(__half* p, float v) { *p = __float2half(v); }
__device__ __forceinline__ void store_as(__nv_bfloat16* p, float v) { *p = __float2bfloat16(v); }

template <typename T>
__global__ void fill_uniform_kernel(T* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    store_as(p + i, lo + (hi - lo) * uniform01(seed, i));
}

__global__ void fill_bytes_kernel(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(mix64(seed * 0x632BE59BD9B4E019ull + i) >> 56);
}

// Quantized blocks after fill_bytes: give every block a sane f16 scale d (and min m for Q4_1), so
// the weights dequantize to values of order 0.1 rather than random f16 bit patterns (inf, NaN).
__global__ void fix_quant_scales_kernel(uint8_t* w, size_t num_blocks, int block_bytes, int has_min, uint64_t seed) {
  for (size_t b = blockIdx.x * size_t(blockDim.x) + threadIdx.x; b < num_blocks; b += size_t(gridDim.x) * blockDim.x) {
    uint16_t* h = reinterpret_cast<uint16_t*>(w + b * size_t(block_bytes));  // block_bytes is even
    const float u = uniform01(seed, 2 * b), s = uniform01(seed, 2 * b + 1) < 0.5f ? -1.0f : 1.0f;
    h[0] = __half_as_ushort(__float2half(s * (0.002f + 0.02f * u)));
    if (has_min) h[1] = __half_as_ushort(__float2half(-0.1f + 0.2f * uniform01(seed ^ 0x5555u, b)));
  }
}

// Reads the whole buffer (16-byte loads) and writes nothing unless the data hold an impossible
// value: evicts L2 without leaving dirty lines to be written back inside the next timed run.
__global__ void read_all_kernel(const int4* p, size_t n, int* sink) {
  int acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const int4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x7A5E11E5) *sink = acc;  // buffers read this way hold zeros
}

__global__ void count_nonfinite_kernel(const float* p, size_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c += isfinite(p[i]) ? 0 : 1;
  if (c) atomicAdd(count, c);
}

__global__ void count_outside_kernel(const int32_t* p, size_t n, int32_t lo, int32_t hi, unsigned long long* count) {
  unsigned long long c = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    c += (p[i] < lo || p[i] >= hi) ? 1 : 0;
  if (c) atomicAdd(count, c);
}

int g_num_sms = 132;

unsigned grid_for(size_t n, int threads = 256) {
  const size_t want = (n + threads - 1) / threads;
  return unsigned(std::max<size_t>(1, std::min<size_t>(want, size_t(g_num_sms) * 16)));
}

// Device memory for n elements of T, freed with the object.
template <typename T>
class Buf {
 public:
  explicit Buf(size_t n) : n_(n) { FLASHSERVE_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(1, n) * sizeof(T))); }
  ~Buf() { cudaFree(p_); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  T* get() const { return p_; }
  size_t size() const { return n_; }
  size_t bytes() const { return n_ * sizeof(T); }
  void upload(const std::vector<T>& h) {
    if (h.size() != n_) throw std::logic_error("Buf::upload: size mismatch");
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice));
  }

 private:
  size_t n_;
  T* p_ = nullptr;
};

uint64_t g_seed = 1;

template <typename T>
void fill_uniform(T* p, size_t n, float lo, float hi, cudaStream_t s) {
  fill_uniform_kernel<T><<<grid_for(n), 256, 0, s>>>(p, n, g_seed++, lo, hi);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

// Bytes of one row of k elements of a weight type (the GGUF layouts of kernels/dtype.h).
size_t weight_row_bytes(fk::DType t, int64_t k) {
  switch (t) {
    case fk::DType::F32: return size_t(k) * 4;
    case fk::DType::F16:
    case fk::DType::BF16: return size_t(k) * 2;
    case fk::DType::Q4_0: return size_t(k / fk::kQuantBlock) * sizeof(fk::BlockQ4_0);
    case fk::DType::Q4_1: return size_t(k / fk::kQuantBlock) * sizeof(fk::BlockQ4_1);
    case fk::DType::Q8_0: return size_t(k / fk::kQuantBlock) * sizeof(fk::BlockQ8_0);
  }
  throw std::invalid_argument("weight_row_bytes: unknown type");
}

const char* type_name(fk::DType t) {
  switch (t) {
    case fk::DType::F32: return "f32";
    case fk::DType::F16: return "f16";
    case fk::DType::BF16: return "bf16";
    case fk::DType::Q4_0: return "q4_0";
    case fk::DType::Q4_1: return "q4_1";
    case fk::DType::Q8_0: return "q8_0";
  }
  return "?";
}

// A weight matrix of `rows` rows of k elements, random, in its GGUF layout.
void fill_weights(void* w, fk::DType t, int64_t rows, int64_t k, cudaStream_t s) {
  const size_t n = size_t(rows) * size_t(k);
  switch (t) {
    case fk::DType::F32: fill_uniform(static_cast<float*>(w), n, -0.1f, 0.1f, s); return;
    case fk::DType::F16: fill_uniform(static_cast<__half*>(w), n, -0.1f, 0.1f, s); return;
    case fk::DType::BF16: fill_uniform(static_cast<__nv_bfloat16*>(w), n, -0.1f, 0.1f, s); return;
    default: break;
  }
  const size_t bytes = size_t(rows) * weight_row_bytes(t, k);
  const size_t blocks = size_t(rows) * size_t(k / fk::kQuantBlock);
  const int block_bytes = int(bytes / blocks);
  fill_bytes_kernel<<<grid_for(bytes), 256, 0, s>>>(static_cast<uint8_t*>(w), bytes, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  fix_quant_scales_kernel<<<grid_for(blocks), 256, 0, s>>>(static_cast<uint8_t*>(w), blocks, block_bytes,
                                                           t == fk::DType::Q4_1 ? 1 : 0, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}

void fill_cache(void* p, fk::DType t, size_t n, cudaStream_t s) {
  if (t == fk::DType::F16) fill_uniform(static_cast<__half*>(p), n, -1.0f, 1.0f, s);
  else if (t == fk::DType::BF16) fill_uniform(static_cast<__nv_bfloat16*>(p), n, -1.0f, 1.0f, s);
  else throw std::invalid_argument("fill_cache: F16 or BF16");
}

std::string check_finite(const float* p, size_t n, cudaStream_t s) {
  Buf<unsigned long long> count(1);
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), s));
  count_nonfinite_kernel<<<grid_for(n), 256, 0, s>>>(p, n, count.get());
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  unsigned long long c = 0;
  FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(&c, count.get(), sizeof c, cudaMemcpyDeviceToHost, s));
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(s));
  return c == 0 ? "ok" : "nonfinite:" + std::to_string(c);
}

std::string check_range(const int32_t* p, size_t n, int32_t lo, int32_t hi, cudaStream_t s) {
  Buf<unsigned long long> count(1);
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(count.get(), 0, sizeof(unsigned long long), s));
  count_outside_kernel<<<grid_for(n), 256, 0, s>>>(p, n, lo, hi, count.get());
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  unsigned long long c = 0;
  FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(&c, count.get(), sizeof c, cudaMemcpyDeviceToHost, s));
  FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(s));
  return c == 0 ? "ok" : "out_of_range:" + std::to_string(c);
}

std::string join_checks(const std::string& a, const std::string& b) {
  if (a == "ok") return b;
  if (b == "ok") return a;
  return a + "," + b;
}

// ---------------------------------------------------------------------------------------------
// Cases: an id built from the kernel and its shape, a body that sets up, times and measures.

struct Peaks {
  double copy_gbps = 0;    // measured: device-to-device copy, read + write bytes
  double gemm_tflops = 0;  // measured: cuBLASLt bf16 8192^3
};

struct Case {
  std::string kernel;
  std::vector<std::pair<std::string, std::string>> shape;  // in a fixed order: part of the id

  Case(std::string k) : kernel(std::move(k)) {}
  Case& with(const std::string& key, const std::string& v) {
    shape.emplace_back(key, v);
    return *this;
  }
  Case& with(const std::string& key, long long v) { return with(key, std::to_string(v)); }
  // kernel:key=value,key=value -- the join key compare.py matches against torch_baselines.py.
  std::string id() const {
    std::string s = kernel + ":";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + shape[i].first + "=" + shape[i].second;
    return s;
  }
};

struct Measure {
  fb::Stats st;
  double peak_mib = 0;
  double bytes = 0;  // the fewest bytes the op must move through device memory
  double flops = 0;  // multiply-add = 2
  std::vector<std::pair<std::string, std::string>> extra;
  std::string target;      // e.g. frac_bw>=0.80, empty if none
  std::string target_met;  // yes / no / compare.py
  std::string check = "ok";
  void add(const std::string& k, const std::string& v) { extra.emplace_back(k, v); }
  void add(const std::string& k, double v, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    extra.emplace_back(k, buf);
  }
};

struct Bench {
  fb::Options opt;
  cudaStream_t stream = nullptr;
  fb::Timer* timer = nullptr;
  Peaks peaks;
  int failures = 0;
  int ran = 0;
};

void emit(const Bench& b, const Case& c, const Measure& m) {
  fb::Line l;
  l.add("impl", "flashserve").add("case", c.id()).add("kernel", c.kernel);
  for (const auto& [k, v] : c.shape) l.add(k, v);
  const double secs = m.st.median_us * 1e-6;
  const double gbps = secs > 0 ? m.bytes / secs / 1e9 : 0;
  const double tflops = secs > 0 ? m.flops / secs / 1e12 : 0;
  l.add("runs", m.st.runs)
      .add("median_us", m.st.median_us, 2)
      .add("p95_us", m.st.p95_us, 2)
      .add("p99_us", m.st.p99_us, 2)
      .add("min_us", m.st.min_us, 2)
      .add("peak_mib", m.peak_mib, 1)
      .add("bytes", (long long)(m.bytes))
      .add("flops", (long long)(m.flops))
      .add("gbps", gbps, 1)
      .add("tflops", tflops, 2)
      .add("frac_bw", b.peaks.copy_gbps > 0 ? gbps / b.peaks.copy_gbps : 0, 3)
      .add("frac_tflops", b.peaks.gemm_tflops > 0 ? tflops / b.peaks.gemm_tflops : 0, 3);
  for (const auto& [k, v] : m.extra) l.add(k, v);
  if (!m.target.empty()) l.add("target", m.target).add("target_met", m.target_met);
  l.add("check", m.check).add("status", "ok");
  l.print();
}

void run_case(Bench& b, const Case& c, const std::function<Measure()>& body) {
  const std::string id = c.id();
  if (!b.opt.filter.empty() && id.find(b.opt.filter) == std::string::npos) return;
  if (b.opt.list) {
    std::printf("%s\n", id.c_str());
    return;
  }
  ++b.ran;
  try {
    emit(b, c, body());
  } catch (const std::exception& e) {
    ++b.failures;
    fb::Line l;
    l.add("impl", "flashserve").add("case", id).add("kernel", c.kernel);
    for (const auto& [k, v] : c.shape) l.add(k, v);
    l.add("status", "error").add("error", e.what());
    l.print();
    // A launch error is cleared by reading it; a fault in a kernel poisons the context for good.
    cudaGetLastError();
    const cudaError_t sticky = cudaDeviceSynchronize();
    if (sticky != cudaSuccess) {
      std::fprintf(stderr, "bench_cuda_ops: CUDA context unusable after %s: %s\n", id.c_str(),
                   cudaGetErrorString(sticky));
      std::printf("# fatal: CUDA context unusable after %s: %s\n", id.c_str(), cudaGetErrorString(sticky));
      std::exit(1);
    }
  }
}

double gbps_of(const Measure& m) { return m.st.median_us > 0 ? m.bytes / (m.st.median_us * 1e-6) / 1e9 : 0; }

// ---------------------------------------------------------------------------------------------
// The device and its measured ceilings.

void print_device(int dev) {
  cudaDeviceProp p{};
  FLASHSERVE_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
  int sm_khz = 0, mem_khz = 0, bus_bits = 0, driver = 0, runtime = 0;
  cudaDeviceGetAttribute(&sm_khz, cudaDevAttrClockRate, dev);
  cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev);
  cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev);
  cudaGetLastError();  // an attribute this runtime no longer reports leaves 0, not an error
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  g_num_sms = p.multiProcessorCount;
  fb::Line l;
  l.add("impl", "flashserve")
      .add("case", "device")
      .add("kernel", "device")
      .add("name", p.name)
      .add("cc", std::to_string(p.major) + "." + std::to_string(p.minor))
      .add("sms", p.multiProcessorCount)
      .add("sm_clock_mhz", sm_khz / 1000)
      .add("mem_clock_mhz", mem_khz / 1000)
      .add("bus_width_bits", bus_bits)
      // Datasheet-style: double data rate x bus width. For reference only; fractions use the
      // measured copy bandwidth below.
      .add("theoretical_gbps", 2.0 * double(mem_khz) * 1e3 * double(bus_bits) / 8.0 / 1e9, 1)
      .add("l2_mib", double(p.l2CacheSize) / (1 << 20), 1)
      .add("mem_gib", double(p.totalGlobalMem) / double(1ull << 30), 1)
      .add("smem_per_block_optin_kib", int(p.sharedMemPerBlockOptin / 1024))
      .add("driver", driver)
      .add("runtime", runtime);
  l.print();
}

void measure_copy(Bench& b) {
  const size_t bytes = size_t(1) << 30;
  Case c("copy_bandwidth");
  c.with("mib", (long long)(bytes >> 20));
  fb::MemProbe probe;
  Buf<uint8_t> src(bytes), dst(bytes);
  fill_bytes_kernel<<<grid_for(bytes), 256, 0, b.stream>>>(src.get(), bytes, g_seed++);
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
  Measure m;
  m.st = b.timer->run(
      [&] { FLASHSERVE_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, b.stream)); },
      {}, &probe);
  m.peak_mib = probe.peak_mib();
  m.bytes = 2.0 * double(bytes);  // read + write
  b.peaks.copy_gbps = gbps_of(m);
  m.add("note", "bytes=read+write;the_denominator_of_every_frac_bw");
  emit(b, c, m);
}

// Read-only streaming rate, for reference (decode attention mostly reads): frac_bw stays against
// the copy bandwidth, as the targets are stated.
void measure_read(Bench& b) {
  const size_t bytes = size_t(1) << 30;
  Case c("read_bandwidth");
  c.with("mib", (long long)(bytes >> 20));
  fb::MemProbe probe;
  Buf<int4> buf(bytes / sizeof(int4));
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, bytes, b.stream));
  Measure m;
  m.st = b.timer->run([&] { fb::launch_l2_flush(buf.get(), bytes, b.stream); }, {}, &probe);
  m.peak_mib = probe.peak_mib();
  m.bytes = double(bytes);
  m.add("note", "simple_16B_load_kernel;reference_only");
  emit(b, c, m);
}

void measure_gemm(Bench& b) {
  const int64_t n = 8192;
  Case c("gemm_peak");
  c.with("dtype", "bf16").with("m", n).with("n", n).with("k", n);
  fb::MemProbe probe;
  Buf<__nv_bfloat16> A(size_t(n * n)), B(size_t(n * n)), D(size_t(n * n));
  fill_uniform(A.get(), A.size(), -1.0f, 1.0f, b.stream);
  fill_uniform(B.get(), B.size(), -1.0f, 1.0f, b.stream);
  const size_t ws_bytes = size_t(64) << 20;
  Buf<uint8_t> ws(ws_bytes);

  cublasLtHandle_t h = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  auto cleanup = [&] {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (op) cublasLtMatmulDescDestroy(op);
    if (h) cublasLtDestroy(h);
  };
  try {
    BENCH_CUBLAS_CHECK(cublasLtCreate(&h));
    BENCH_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    // D[m][n] (column-major) = A^T B with A stored k x m and B k x n: the "TN" layout.
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    BENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    BENCH_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    BENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, n, n, n));
    BENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, n, n, n));
    BENCH_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n));
    BENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    BENCH_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                            &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t heur{};
    int found = 0;
    BENCH_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &heur, &found));
    if (found < 1) throw std::runtime_error("cuBLASLt found no bf16 algorithm");
    const float alpha = 1.0f, beta = 0.0f;
    Measure m;
    m.st = b.timer->run(
        [&] {
          BENCH_CUBLAS_CHECK(cublasLtMatmul(h, op, &alpha, A.get(), la, B.get(), lb, &beta, D.get(), ld, D.get(), ld,
                                            &heur.algo, ws.get(), ws_bytes, b.stream));
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.flops = 2.0 * double(n) * double(n) * double(n);
    m.bytes = 3.0 * double(n) * double(n) * 2.0;
    b.peaks.gemm_tflops = m.st.median_us > 0 ? m.flops / (m.st.median_us * 1e-6) / 1e12 : 0;
    m.add("note", "cuBLASLt_bf16_in_bf16_out_f32_accumulate;the_denominator_of_every_frac_tflops");
    cleanup();
    emit(b, c, m);
  } catch (...) {
    cleanup();
    throw;
  }
}

// ---------------------------------------------------------------------------------------------
// Per-op cases.

constexpr float kEps = 1e-5f;

void bench_rmsnorm(Bench& b, int64_t rows, int64_t dim) {
  Case c("rmsnorm");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    Buf<float> x(rows * dim), w(dim), y(rows * dim);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(w.get(), w.size(), 0.5f, 1.5f, b.stream);
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::rmsnorm(x.get(), w.get(), y.get(), rows, dim, kEps, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(2 * rows * dim + dim) * 4;  // read x, write y (+ weight)
    m.check = check_finite(y.get(), y.size(), b.stream);
    if (rows >= 4096) {
      m.target = "frac_bw>=0.80";
      m.target_met = gbps_of(m) >= 0.80 * b.peaks.copy_gbps ? "yes" : "no";
    }
    return m;
  });
}

void bench_add_rmsnorm(Bench& b, int64_t rows, int64_t dim) {
  Case c("add_rmsnorm");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    Buf<float> x(rows * dim), r(rows * dim), w(dim), y(rows * dim);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(r.get(), r.size(), -0.01f, 0.01f, b.stream);  // x grows slowly over the runs
    fill_uniform(w.get(), w.size(), 0.5f, 1.5f, b.stream);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::add_rmsnorm(x.get(), r.get(), w.get(), y.get(), rows, dim, kEps, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(4 * rows * dim + dim) * 4;  // read x and residual, write x and y
    m.check = join_checks(check_finite(y.get(), y.size(), b.stream), check_finite(x.get(), x.size(), b.stream));
    if (rows >= 4096) {
      m.target = "frac_bw>=0.80";
      m.target_met = gbps_of(m) >= 0.80 * b.peaks.copy_gbps ? "yes" : "no";
    }
    return m;
  });
}

void bench_rope(Bench& b, int64_t tokens, int64_t heads, int64_t head_dim) {
  Case c("rope");
  c.with("dtype", "f32").with("tokens", tokens).with("heads", heads).with("head_dim", head_dim);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    Buf<float> x(tokens * heads * head_dim);
    Buf<int32_t> pos(tokens);
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    std::vector<int32_t> hp(tokens);
    for (int64_t t = 0; t < tokens; ++t) hp[t] = int32_t(t % 8192);  // sequences of up to 8192 positions
    pos.upload(hp);
    fk::RopeParams p;
    p.rot_dim = int32_t(head_dim);
    p.theta_base = 10000.0f;
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::rope(x.get(), pos.get(), tokens, heads, head_dim, p, b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(2 * tokens * heads * head_dim) * 4 + double(tokens) * 4;  // in place: read + write x
    m.check = check_finite(x.get(), x.size(), b.stream);
    return m;
  });
}

void bench_swiglu(Bench& b, int64_t rows, int64_t dim) {
  Case c("swiglu");
  c.with("dtype", "f32").with("rows", rows).with("dim", dim);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const size_t n = size_t(rows * dim);
    Buf<float> g(n), u(n), o(n);
    fill_uniform(g.get(), n, -4.0f, 4.0f, b.stream);
    fill_uniform(u.get(), n, -1.0f, 1.0f, b.stream);
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::swiglu(g.get(), u.get(), o.get(), int64_t(n), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = 3.0 * double(n) * 4;
    m.check = check_finite(o.get(), n, b.stream);
    return m;
  });
}

void bench_get_rows(Bench& b, fk::DType t, int64_t vocab, int64_t k, int64_t n) {
  Case c("get_rows");
  c.with("wtype", type_name(t)).with("vocab", vocab).with("k", k).with("n", n);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const size_t rb = weight_row_bytes(t, k);
    Buf<uint8_t> w(size_t(vocab) * rb);
    fill_weights(w.get(), t, vocab, k, b.stream);
    std::mt19937 rng(7);
    std::vector<int32_t> hid(n);
    for (auto& v : hid) v = int32_t(rng() % uint32_t(vocab));
    Buf<int32_t> ids(n);
    ids.upload(hid);
    Buf<float> out(size_t(n * k));
    Measure m;
    m.st = b.timer->run([&] { fk::cuda::get_rows(w.get(), t, k, ids.get(), n, out.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n) * double(rb) + double(n * k) * 4 + double(n) * 4;
    m.check = check_finite(out.get(), out.size(), b.stream);
    return m;
  });
}

// tokens <= kGemvMaxTokens: the dequantizing GEMV (bandwidth: gbps / frac_bw on weight + x + y
// bytes). Above: weights expanded into scratch, then cuBLASLt (compute: tflops / frac_tflops).
void bench_matmul(Bench& b, fk::DType t, int64_t tokens, int64_t n_out, int64_t k) {
  Case c("matmul");
  c.with("wtype", type_name(t)).with("tokens", tokens).with("n_out", n_out).with("k", k);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const size_t rb = weight_row_bytes(t, k);
    Buf<uint8_t> w(size_t(n_out) * rb);
    fill_weights(w.get(), t, n_out, k, b.stream);
    Buf<float> x(size_t(tokens * k)), y(size_t(tokens * n_out));
    fill_uniform(x.get(), x.size(), -1.0f, 1.0f, b.stream);
    fk::cuda::MatmulContext ctx;
    ctx.reserve(tokens, k, n_out);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::matmul(ctx, x.get(), tokens, k, w.get(), t, n_out, y.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n_out) * double(rb) + double(tokens) * double(k + n_out) * 4;
    m.flops = 2.0 * double(tokens) * double(n_out) * double(k);
    m.add("path", tokens <= fk::cuda::kGemvMaxTokens ? "gemv" : "cublaslt");
    m.add("weight_bytes", std::to_string(size_t(n_out) * rb));
    m.check = check_finite(y.get(), y.size(), b.stream);
    return m;
  });
}

// Block tables: each sequence's blocks, taken in order from a random permutation of the pool, as
// after the allocator has churned. Returns [num_seqs][blocks_per_seq].
std::vector<int32_t> shuffled_block_tables(int64_t num_seqs, int64_t blocks_per_seq, uint32_t seed) {
  std::vector<int32_t> perm(size_t(num_seqs * blocks_per_seq));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  return perm;
}

constexpr int32_t kBlockSize = 16;
constexpr int32_t kHeads = 32;
constexpr int32_t kKvHeads = 8;

void bench_kv_write(Bench& b, fk::DType kv, int64_t tokens, int32_t head_dim) {
  Case c("kv_write");
  c.with("dtype", type_name(kv)).with("tokens", tokens).with("kv_heads", kKvHeads).with("head_dim", head_dim);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t blocks = (tokens + kBlockSize - 1) / kBlockSize;
    const size_t row = size_t(kKvHeads) * head_dim;
    const size_t cache_elems = size_t(blocks) * kBlockSize * row;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    Buf<float> k(size_t(tokens) * row), v(size_t(tokens) * row);
    fill_uniform(k.get(), k.size(), -1.0f, 1.0f, b.stream);
    fill_uniform(v.get(), v.size(), -1.0f, 1.0f, b.stream);
    const std::vector<int32_t> table = shuffled_block_tables(1, blocks, 11);
    std::vector<int32_t> slots(tokens);
    for (int64_t t = 0; t < tokens; ++t) slots[t] = table[t / kBlockSize] * kBlockSize + int32_t(t % kBlockSize);
    Buf<int32_t> slot_mapping(tokens);
    slot_mapping.upload(slots);
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::kv_write(layout, kv, kc.get(), vc.get(), k.get(), v.get(), slot_mapping.get(), tokens, b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(tokens) * double(row) * 2 * (4 + 2) + double(tokens) * 4;  // read f32 K,V; write 16-bit K,V
    return m;
  });
}

struct AttnBuffers {
  Buf<int32_t> query_start, context_lens, block_tables;
  AttnBuffers(int64_t seqs, int64_t blocks_per_seq)
      : query_start(seqs + 1), context_lens(seqs), block_tables(seqs * blocks_per_seq) {}
};

// Causal prefill of `batch` fresh sequences of `seq` tokens each (their K/V already in the pages).
void bench_prefill(Bench& b, fk::DType kv, int32_t head_dim, int64_t seq, int64_t batch) {
  Case c("prefill_attention");
  c.with("dtype", type_name(kv)).with("head_dim", head_dim).with("seq", seq).with("batch", batch)
      .with("heads", kHeads).with("kv_heads", kKvHeads);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t tokens = seq * batch;
    const int64_t bps = (seq + kBlockSize - 1) / kBlockSize;
    const size_t cache_elems = size_t(batch * bps) * kBlockSize * kKvHeads * head_dim;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    fill_cache(kc.get(), kv, cache_elems, b.stream);
    fill_cache(vc.get(), kv, cache_elems, b.stream);
    Buf<float> q(size_t(tokens) * kHeads * head_dim), out(size_t(tokens) * kHeads * head_dim);
    fill_uniform(q.get(), q.size(), -1.0f, 1.0f, b.stream);
    AttnBuffers ab(batch, bps);
    std::vector<int32_t> qs(batch + 1), cl(batch, int32_t(seq));
    for (int64_t s = 0; s <= batch; ++s) qs[s] = int32_t(s * seq);
    ab.query_start.upload(qs);
    ab.context_lens.upload(cl);
    ab.block_tables.upload(shuffled_block_tables(batch, bps, 13));
    fk::cuda::AttentionBatch ba;
    ba.query_start = ab.query_start.get();
    ba.context_lens = ab.context_lens.get();
    ba.block_tables = ab.block_tables.get();
    ba.num_seqs = int32_t(batch);
    ba.max_blocks_per_seq = int32_t(bps);
    ba.max_num_queries = int32_t(seq);
    ba.max_context_len = int32_t(seq);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::prefill_attention(q.get(), kc.get(), vc.get(), kv, layout, ba, kHeads, scale, out.get(), b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    // Causal: half of the QK^T and PV products, 2 flops each -> 4 * seq^2 * d * heads / 2 per sequence.
    m.flops = double(batch) * 4.0 * double(seq) * double(seq) * head_dim * kHeads / 2.0;
    m.bytes = double(tokens) * kHeads * head_dim * 4 * 2 + double(tokens) * kKvHeads * head_dim * 2 * 2;
    m.check = check_finite(out.get(), out.size(), b.stream);
    if (seq >= 2048) {
      m.target = "speed_vs_torch_sdpa_flash>=0.90";
      m.target_met = "compare.py";
    }
    m.add("q_out", "f32");
    return m;
  });
}

// One query per sequence over `context` cached positions.
void bench_decode(Bench& b, fk::DType kv, int32_t head_dim, int64_t batch, int64_t context) {
  Case c("decode_attention");
  c.with("dtype", type_name(kv)).with("head_dim", head_dim).with("batch", batch).with("context", context)
      .with("heads", kHeads).with("kv_heads", kKvHeads);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const fk::KvLayout layout{kBlockSize, kKvHeads, head_dim};
    const int64_t bps = (context + kBlockSize - 1) / kBlockSize;
    const size_t cache_elems = size_t(batch * bps) * kBlockSize * kKvHeads * head_dim;
    Buf<uint16_t> kc(cache_elems), vc(cache_elems);
    fill_cache(kc.get(), kv, cache_elems, b.stream);
    fill_cache(vc.get(), kv, cache_elems, b.stream);
    Buf<float> q(size_t(batch) * kHeads * head_dim), out(size_t(batch) * kHeads * head_dim);
    fill_uniform(q.get(), q.size(), -1.0f, 1.0f, b.stream);
    AttnBuffers ab(batch, bps);
    std::vector<int32_t> qs(batch + 1), cl(batch, int32_t(context));
    for (int64_t s = 0; s <= batch; ++s) qs[s] = int32_t(s);
    ab.query_start.upload(qs);
    ab.context_lens.upload(cl);
    ab.block_tables.upload(shuffled_block_tables(batch, bps, 17));
    fk::cuda::AttentionBatch ba;
    ba.query_start = ab.query_start.get();
    ba.context_lens = ab.context_lens.get();
    ba.block_tables = ab.block_tables.get();
    ba.num_seqs = int32_t(batch);
    ba.max_blocks_per_seq = int32_t(bps);
    ba.max_num_queries = 1;
    ba.max_context_len = int32_t(context);
    const size_t ws_bytes =
        fk::cuda::decode_attention_workspace_bytes(int32_t(batch), kHeads, head_dim, int32_t(context));
    Buf<uint8_t> ws(ws_bytes);
    const float scale = 1.0f / std::sqrt(float(head_dim));
    Measure m;
    m.st = b.timer->run(
        [&] {
          fk::cuda::decode_attention(q.get(), kc.get(), vc.get(), kv, layout, ba, kHeads, scale, out.get(), ws.get(),
                                     b.stream);
        },
        {}, &probe);
    m.peak_mib = probe.peak_mib();
    // The K and V pages each sequence reads, once: the floor of any decode kernel.
    const double kv_bytes = double(batch) * double(context) * kKvHeads * head_dim * 2 * 2;
    m.bytes = kv_bytes;
    m.flops = 4.0 * double(batch) * double(context) * head_dim * kHeads;
    m.add("floor_us", b.peaks.copy_gbps > 0 ? kv_bytes / (b.peaks.copy_gbps * 1e3) : 0, 2);
    m.add("workspace_mib", double(ws_bytes) / (1 << 20), 2);
    m.check = check_finite(out.get(), out.size(), b.stream);
    if (kv == fk::DType::F16 && head_dim == 128 && batch == 64 && context == 4096) {
      m.target = "frac_bw>=0.80";
      m.target_met = gbps_of(m) >= 0.80 * b.peaks.copy_gbps ? "yes" : "no";
    }
    return m;
  });
}

void bench_moe(Bench& b, int64_t tokens, int32_t experts, int32_t top_k) {
  Case c("moe_route");
  c.with("dtype", "f32").with("tokens", tokens).with("experts", experts).with("top_k", top_k);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    Buf<float> logits(size_t(tokens) * experts);
    fill_uniform(logits.get(), logits.size(), -3.0f, 3.0f, b.stream);
    const size_t assignments = size_t(tokens) * top_k;
    Buf<int32_t> ids(assignments), offsets(size_t(experts) + 1), sorted(assignments);
    Buf<float> weights(assignments);
    const size_t ws_bytes = fk::cuda::moe_route_workspace_bytes(tokens, experts, top_k);
    Buf<uint8_t> ws(ws_bytes);
    fk::MoeRouting r{ids.get(), weights.get(), offsets.get(), sorted.get()};
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::moe_route(logits.get(), tokens, experts, top_k, true, r, ws.get(), b.stream); }, {}, &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(tokens) * experts * 4 + double(assignments) * (4 + 4 + 4) + double(experts + 1) * 4;
    m.add("renormalize", "1");
    m.add("workspace_mib", double(ws_bytes) / (1 << 20), 3);
    int32_t total = -1;
    FLASHSERVE_CUDA_CHECK(cudaMemcpy(&total, offsets.get() + experts, sizeof total, cudaMemcpyDeviceToHost));
    std::string chk = join_checks(check_range(ids.get(), assignments, 0, experts, b.stream),
                                  check_range(sorted.get(), assignments, 0, int32_t(assignments), b.stream));
    chk = join_checks(chk, check_finite(weights.get(), assignments, b.stream));
    if (total != int32_t(assignments)) chk = join_checks(chk, "offsets_total:" + std::to_string(total));
    m.check = chk;
    if (tokens == 32768 && experts == 64 && top_k == 2) {
      m.target = "median_us<150";
      m.target_met = m.st.median_us < 150.0 ? "yes" : "no";
    }
    return m;
  });
}

void bench_sample(Bench& b, const std::string& mode, int32_t rows, int32_t vocab) {
  Case c("sample_rows");
  c.with("mode", mode).with("rows", rows).with("vocab", vocab);
  run_case(b, c, [&] {
    fb::MemProbe probe;
    const size_t n = size_t(rows) * vocab;
    Buf<float> pristine(n), logits(n);
    fill_uniform(pristine.get(), n, -10.0f, 10.0f, b.stream);
    std::mt19937 rng(23);
    std::uniform_real_distribution<double> uni(0.0, 1.0);
    std::vector<fk::SamplingRow> hrows(rows);
    std::vector<fk::TokenAdjust> hadj;
    for (int32_t r = 0; r < rows; ++r) {
      fk::SamplingRow& s = hrows[r];
      s.uniform = uni(rng);
      if (mode == "greedy") {
        s.temperature = 0.0f;
      } else if (mode == "top_p") {
        s.temperature = 0.8f;
        s.top_p = 0.9f;
      } else {  // top_k_top_p_penalties
        s.temperature = 0.7f;
        s.top_k = 50;
        s.top_p = 0.95f;
        s.repetition_penalty = 1.1f;
        s.presence_penalty = 0.1f;
        s.frequency_penalty = 0.1f;
        s.adjust_begin = int32_t(hadj.size());
        for (int i = 0; i < 32; ++i) hadj.push_back({int32_t(rng() % uint32_t(vocab)), int32_t(rng() % 3), 1, 0.0f});
        s.adjust_end = int32_t(hadj.size());
      }
    }
    if (hadj.empty()) hadj.push_back({0, 0, 0, 0.0f});  // a valid pointer even when no row uses it
    Buf<fk::SamplingRow> drows(rows);
    drows.upload(hrows);
    Buf<fk::TokenAdjust> dadj(hadj.size());
    dadj.upload(hadj);
    Buf<int32_t> tokens(rows);
    Measure m;
    m.st = b.timer->run(
        [&] { fk::cuda::sample_rows(logits.get(), rows, vocab, drows.get(), dadj.get(), tokens.get(), b.stream); },
        // The op overwrites its logits: restore them before every run, untimed.
        [&] {
          FLASHSERVE_CUDA_CHECK(
              cudaMemcpyAsync(logits.get(), pristine.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, b.stream));
        },
        &probe);
    m.peak_mib = probe.peak_mib();
    m.bytes = double(n) * 4;  // the logits, read once
    m.check = check_range(tokens.get(), size_t(rows), 0, vocab, b.stream);
    return m;
  });
}

void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--quick] [--filter SUBSTR] [--runs N] [--warmup N] [--max-seconds S] [--no-flush] [--list]\n"
               "  --quick        3 warm-up runs, at most 30 timed runs (0.5 s) per case\n"
               "  --filter S     only cases whose id (kernel:key=value,...) contains S\n"
               "  --runs N       at most N timed runs per case (default 200; at least 20 unless N is smaller)\n"
               "  --warmup N     warm-up runs per case (default 10)\n"
               "  --max-seconds  fewer timed runs when a case would take longer than this (default 2)\n"
               "  --no-flush     do not evict L2 before each run\n"
               "  --list         print the case ids and exit (needs no GPU)\n",
               argv0);
}

void all_cases(Bench& b) {
  using fk::DType;
  bench_rmsnorm(b, 16384, 4096);
  bench_rmsnorm(b, 64, 4096);
  bench_add_rmsnorm(b, 16384, 4096);
  bench_add_rmsnorm(b, 64, 4096);
  bench_rope(b, 16384, 32, 128);
  bench_rope(b, 64, 32, 128);
  bench_swiglu(b, 16384, 11008);
  bench_swiglu(b, 64, 11008);

  for (DType t : {DType::F16, DType::Q4_0, DType::Q8_0}) bench_get_rows(b, t, 32000, 4096, 4096);

  const std::pair<int64_t, int64_t> shapes[] = {{4096, 4096}, {11008, 4096}, {4096, 11008}};
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::F16})
    for (int64_t tokens : {1, 8})
      for (auto [n_out, k] : shapes) bench_matmul(b, t, tokens, n_out, k);
  for (DType t : {DType::F16, DType::Q4_0, DType::Q8_0})
    for (int64_t tokens : {512, 4096})
      for (auto [n_out, k] : {shapes[0], shapes[1]}) bench_matmul(b, t, tokens, n_out, k);

  for (DType kv : {DType::F16, DType::BF16}) bench_kv_write(b, kv, 16384, 128);

  for (DType kv : {DType::F16, DType::BF16})
    for (int32_t hd : {64, 128})
      for (int64_t seq : {512, 2048, 4096, 8192}) bench_prefill(b, kv, hd, seq, 16384 / seq);

  bench_decode(b, DType::F16, 128, 64, 4096);
  bench_decode(b, DType::BF16, 128, 64, 4096);
  bench_decode(b, DType::F16, 64, 64, 4096);
  bench_decode(b, DType::F16, 128, 16, 16384);
  bench_decode(b, DType::F16, 128, 256, 1024);
  bench_decode(b, DType::F16, 128, 1, 4096);

  bench_moe(b, 32768, 64, 2);
  bench_moe(b, 32768, 8, 2);
  bench_moe(b, 32768, 256, 8);
  bench_moe(b, 64, 64, 2);

  bench_sample(b, "greedy", 64, 49152);
  bench_sample(b, "top_p", 64, 49152);
  bench_sample(b, "top_k_top_p_penalties", 64, 49152);
  bench_sample(b, "top_p", 64, 128256);
}

}  // namespace

namespace flashserve::bench {
void launch_l2_flush(const void* buf, size_t bytes, cudaStream_t stream) {
  const size_t n = bytes / sizeof(int4);
  read_all_kernel<<<unsigned(g_num_sms) * 4, 512, 0, stream>>>(static_cast<const int4*>(buf), n,
                                                               const_cast<int*>(static_cast<const int*>(buf)));
  FLASHSERVE_CUDA_CHECK(cudaGetLastError());
}
}  // namespace flashserve::bench

int main(int argc, char** argv) {
  Bench b;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage(argv[0]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--quick") {
      b.opt.warmup = 3;
      b.opt.runs = 30;
      b.opt.min_runs = 10;
      b.opt.max_seconds = 0.5;
    } else if (a == "--filter") {
      b.opt.filter = next();
    } else if (a == "--runs") {
      b.opt.runs = std::max(1, std::atoi(next().c_str()));
    } else if (a == "--warmup") {
      b.opt.warmup = std::max(0, std::atoi(next().c_str()));
    } else if (a == "--max-seconds") {
      b.opt.max_seconds = std::atof(next().c_str());
    } else if (a == "--no-flush") {
      b.opt.flush_l2 = false;
    } else if (a == "--list") {
      b.opt.list = true;
    } else if (a == "-h" || a == "--help") {
      usage(argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "bench_cuda_ops: unknown argument '%s'\n", a.c_str());
      usage(argv[0]);
      return 2;
    }
  }

  if (b.opt.list) {
    all_cases(b);
    return 0;
  }

  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "bench_cuda_ops: no CUDA device (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found 0 devices");
    return 2;
  }

  try {
    FLASHSERVE_CUDA_CHECK(cudaSetDevice(0));
    std::printf("# bench_cuda_ops: warmup=%d runs<=%d min_runs=%d max_seconds=%.2f flush_l2=%d filter=%s\n",
                b.opt.warmup, b.opt.runs, b.opt.min_runs, b.opt.max_seconds, b.opt.flush_l2 ? 1 : 0,
                b.opt.filter.empty() ? "-" : b.opt.filter.c_str());
    print_device(0);
    FLASHSERVE_CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
    fb::Timer timer(b.opt, b.stream);
    b.timer = &timer;
    // The two ceilings every fraction divides by: always measured, whatever the filter.
    measure_copy(b);
    measure_read(b);
    measure_gemm(b);
    all_cases(b);
    b.timer = nullptr;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_cuda_ops: %s\n", ex.what());
    std::printf("# fatal: %s\n", ex.what());
    return 1;
  }
  std::printf("# done: %d cases, %d failed\n", b.ran, b.failures);
  return b.failures ? 1 : 0;
}
