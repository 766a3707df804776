// A plain GPU timing harness for bench_cuda_ops: no Google Benchmark, only the CUDA runtime.
//
// Each case: warm-up runs, then N timed runs, each bracketed by its own pair of CUDA events on the
// case's stream. Before every run (outside the events) an optional `before` hook restores inputs an
// op consumes, and a read-only pass over a 256 MiB buffer evicts the L2 cache, so that an op whose
// working set would fit in L2 (a 4096x4096 Q4_0 weight is 9 MiB; H100 L2 is 50 MiB) is timed
// reading device memory, as it does in a model where the other layers' weights pass through L2 in
// between. The flush also keeps the GPU busy while the host queues the next run, so short kernels
// are not timed waiting for their own launch. Reported: median, p95, p99 and min in microseconds.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace flashserve::bench {

struct Options {
  int warmup = 10;
  int runs = 200;          // at most this many timed runs ...
  int min_runs = 20;       // ... and at least this many,
  double max_seconds = 2;  // ... fewer when the runs would take longer than this in all
  bool flush_l2 = true;
  std::string filter;      // run only cases whose id contains this
  bool list = false;       // print the case ids, run nothing
};

struct Stats {
  int runs = 0;
  double median_us = 0, p95_us = 0, p99_us = 0, min_us = 0, mean_us = 0;
};

// Nearest-rank percentile of sorted samples (p in (0, 1]); the median interpolates.
inline double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t idx = size_t(std::ceil(p * double(sorted.size())));
  idx = std::clamp<size_t>(idx, 1, sorted.size()) - 1;
  return sorted[idx];
}

inline Stats summarize(std::vector<double> us) {
  Stats s;
  std::sort(us.begin(), us.end());
  s.runs = int(us.size());
  if (us.empty()) return s;
  const size_t n = us.size();
  s.median_us = n % 2 ? us[n / 2] : 0.5 * (us[n / 2 - 1] + us[n / 2]);
  s.p95_us = percentile(us, 0.95);
  s.p99_us = percentile(us, 0.99);
  s.min_us = us.front();
  double sum = 0;
  for (double v : us) sum += v;
  s.mean_us = sum / double(n);
  return s;
}

// Launches a read of the whole flush buffer (defined in bench_cuda_ops.cu).
void launch_l2_flush(const void* buf, size_t bytes, cudaStream_t stream);

// Device memory in use on the whole device (cudaMemGetInfo); a case's peak is the largest rise
// over the value read before it allocated anything. Includes what the ops allocate themselves
// (cuBLASLt handles, matmul scratch), which a count of our own cudaMallocs would miss.
class MemProbe {
 public:
  MemProbe() { base_ = used(); peak_ = base_; }
  void sample() { peak_ = std::max(peak_, used()); }
  double peak_mib() const { return double(peak_ - base_) / (1024.0 * 1024.0); }

 private:
  static size_t used() {
    size_t free_b = 0, total_b = 0;
    FLASHSERVE_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
  }
  size_t base_ = 0, peak_ = 0;
};

class Timer {
 public:
  Timer(const Options& opt, cudaStream_t stream) : opt_(opt), stream_(stream) {
    if (opt_.flush_l2) FLASHSERVE_CUDA_CHECK(cudaMalloc(&flush_buf_, kFlushBytes));
    if (flush_buf_) FLASHSERVE_CUDA_CHECK(cudaMemset(flush_buf_, 0, kFlushBytes));
  }
  ~Timer() { cudaFree(flush_buf_); }
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;

  cudaStream_t stream() const { return stream_; }

  // `op` queues the work on stream(); `before` (optional) restores inputs, untimed.
  // `probe` is sampled after the warm-up and after the timed runs.
  Stats run(const std::function<void()>& op, const std::function<void()>& before = {}, MemProbe* probe = nullptr) {
    auto prepare = [&] {
      if (before) before();
      if (flush_buf_) launch_l2_flush(flush_buf_, kFlushBytes, stream_);
    };
    for (int i = 0; i < opt_.warmup; ++i) {
      prepare();
      op();
    }
    FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
    FLASHSERVE_CUDA_CHECK(cudaGetLastError());
    if (probe) probe->sample();

    // A short timed pass sizes the real one so that slow cases stay within max_seconds.
    const std::vector<double> est = timed(std::min(3, opt_.runs), op, prepare);
    const double per_run_us = std::max(1.0, summarize(est).median_us);
    int runs = int(opt_.max_seconds * 1e6 / per_run_us);
    runs = std::clamp(runs, std::min(opt_.min_runs, opt_.runs), opt_.runs);
    Stats s = summarize(timed(runs, op, prepare));
    if (probe) probe->sample();
    return s;
  }

 private:
  static constexpr size_t kFlushBytes = size_t(256) << 20;

  std::vector<double> timed(int runs, const std::function<void()>& op, const std::function<void()>& prepare) {
    std::vector<cudaEvent_t> start(runs), stop(runs);
    for (int i = 0; i < runs; ++i) {
      FLASHSERVE_CUDA_CHECK(cudaEventCreate(&start[i]));
      FLASHSERVE_CUDA_CHECK(cudaEventCreate(&stop[i]));
    }
    std::vector<double> us(runs);
    try {
      for (int i = 0; i < runs; ++i) {
        prepare();
        FLASHSERVE_CUDA_CHECK(cudaEventRecord(start[i], stream_));
        op();
        FLASHSERVE_CUDA_CHECK(cudaEventRecord(stop[i], stream_));
      }
      FLASHSERVE_CUDA_CHECK(cudaStreamSynchronize(stream_));
      FLASHSERVE_CUDA_CHECK(cudaGetLastError());
      for (int i = 0; i < runs; ++i) {
        float ms = 0;
        FLASHSERVE_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
        us[i] = double(ms) * 1e3;
      }
    } catch (...) {
      for (int i = 0; i < runs; ++i) {
        cudaEventDestroy(start[i]);
        cudaEventDestroy(stop[i]);
      }
      throw;
    }
    for (int i = 0; i < runs; ++i) {
      cudaEventDestroy(start[i]);
      cudaEventDestroy(stop[i]);
    }
    return us;
  }

  Options opt_;
  cudaStream_t stream_;
  void* flush_buf_ = nullptr;
};

// One output line: `key=value` fields separated by single spaces, values without spaces.
class Line {
 public:
  Line& add(const std::string& key, const std::string& value) {
    std::string v = value;
    for (char& c : v)
      if (c == ' ' || c == '\t' || c == '\n') c = '_';
    fields_.emplace_back(key, v);
    return *this;
  }
  Line& add(const std::string& key, const char* value) { return add(key, std::string(value)); }
  Line& add(const std::string& key, long long value) { return add(key, std::to_string(value)); }
  Line& add(const std::string& key, int value) { return add(key, std::to_string(value)); }
  Line& add(const std::string& key, double value, int decimals) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
    return add(key, std::string(buf));
  }
  std::string str() const {
    std::string s;
    for (const auto& [k, v] : fields_) {
      if (!s.empty()) s += ' ';
      s += k + "=" + v;
    }
    return s;
  }
  void print() const {
    std::printf("%s\n", str().c_str());
    std::fflush(stdout);
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

}  // namespace flashserve::bench
