// One benchmark case: an id built from the kernel and its shape (the key compare.py joins on), a
// body that sets up, times and measures, and the one line of key=value fields it prints.
#pragma once
#include <cuda_runtime.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/kernels/bench_harness.h"

namespace flashserve::bench {

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
  Stats st;
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
  Options opt;
  cudaStream_t stream = nullptr;
  Timer* timer = nullptr;
  Peaks peaks;
  int failures = 0;
  int ran = 0;
};

void emit(const Bench& b, const Case& c, const Measure& m);
// Runs the case unless filtered out (or only lists it); a failure prints status=error, and a CUDA
// context broken by a kernel fault ends the program.
void run_case(Bench& b, const Case& c, const std::function<Measure()>& body);
double gbps_of(const Measure& m);
// Sets the target "frac_bw >= fraction" of the measured copy bandwidth and whether it was met.
void set_bandwidth_target(Measure& m, const Bench& b, double fraction);

}  // namespace flashserve::bench
