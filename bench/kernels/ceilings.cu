// The device and the two ceilings every fraction in bench_cuda_ops divides by: copy bandwidth (a
// large device-to-device copy, bytes read + bytes written) and a bf16 GEMM through cuBLASLt (8192^3,
// f32 accumulation); plus a read-only streaming rate for reference.
#include "bench/kernels/ceilings.h"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <stdexcept>
#include <string>

#include "bench/kernels/device_inputs.h"

#define BENCH_CUBLAS_CHECK(stmt)                                                                   \
  do {                                                                                             \
    const cublasStatus_t bench_st_ = (stmt);                                                       \
    if (bench_st_ != CUBLAS_STATUS_SUCCESS)                                                        \
      throw std::runtime_error(std::string(#stmt) + " failed: cublas status " +                    \
                               std::to_string(int(bench_st_)));                                    \
  } while (0)

namespace flashserve::bench {

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
  set_grid_sms(p.multiProcessorCount);
  Line l;
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
  MemProbe probe;
  Buf<uint8_t> src(bytes), dst(bytes);
  fill_bytes(src.get(), bytes, b.stream);
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
  MemProbe probe;
  Buf<int4> buf(bytes / sizeof(int4));
  FLASHSERVE_CUDA_CHECK(cudaMemsetAsync(buf.get(), 0, bytes, b.stream));
  Measure m;
  m.st = b.timer->run([&] { launch_l2_flush(buf.get(), bytes, b.stream); }, {}, &probe);
  m.peak_mib = probe.peak_mib();
  m.bytes = double(bytes);
  m.add("note", "simple_16B_load_kernel;reference_only");
  emit(b, c, m);
}

void measure_gemm(Bench& b) {
  const int64_t n = 8192;
  Case c("gemm_peak");
  c.with("dtype", "bf16").with("m", n).with("n", n).with("k", n);
  MemProbe probe;
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

}  // namespace flashserve::bench
