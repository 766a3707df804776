#include "bench/kernels/bench_case.h"

#include <cstdio>
#include <cstdlib>

namespace flashserve::bench {

void emit(const Bench& b, const Case& c, const Measure& m) {
  Line l;
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
    Line l;
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

void set_bandwidth_target(Measure& m, const Bench& b, double fraction) {
  char target[32];
  std::snprintf(target, sizeof target, "frac_bw>=%.2f", fraction);
  m.target = target;
  m.target_met = gbps_of(m) >= fraction * b.peaks.copy_gbps ? "yes" : "no";
}

}  // namespace flashserve::bench
