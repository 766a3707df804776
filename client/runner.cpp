#include "client/runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

#include "client/arrival.h"

namespace flashserve::bench {
namespace {

using clock = std::chrono::steady_clock;

// Results land in slots by workload index; a slot stays empty for a request never sent.
struct Slots {
  explicit Slots(size_t n) : results(n) {}
  std::vector<std::optional<RequestResult>> results;
  std::atomic<int32_t> num_done{0};
};

void print_progress(int32_t done, int32_t total) {
  constexpr int kWidth = 30;
  const int filled = total > 0 ? int(int64_t(kWidth) * done / total) : kWidth;
  std::fprintf(stderr, "\r[%s%s] %d/%d", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(kWidth - filled), ' ').c_str(), done, total);
  std::fflush(stderr);
}

// Redraws the bar until `stop`; the total is the workload size, so a run cut short by
// --duration ends below 100%.
std::jthread progress_thread(const Slots& slots, int32_t total, bool enabled) {
  if (!enabled) return {};
  return std::jthread([&slots, total](std::stop_token stop) {
    // Redrawn only on change, so a log of stderr does not fill with identical lines.
    for (int32_t shown = -1; !stop.stop_requested(); std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
      if (const int32_t done = slots.num_done.load(); done != shown) print_progress(shown = done, total);
    }
    print_progress(slots.num_done.load(), total);
    std::fputc('\n', stderr);
  });
}

void send_one(Backend& backend, const BenchRequest& request, Slots& slots, size_t i, clock::time_point start) {
  const double sent_s = std::chrono::duration<double>(clock::now() - start).count();
  slots.results[i] = backend.send(request);
  slots.results[i]->sent_s = sent_s;
  slots.num_done.fetch_add(1);
}

bool past_deadline(clock::time_point start, double duration_s) {
  return duration_s > 0 && std::chrono::duration<double>(clock::now() - start).count() >= duration_s;
}

// One thread per request, started on the arrival schedule.
void run_open_loop(Backend& backend, const std::vector<BenchRequest>& requests, const RunOptions& options,
                   clock::time_point start, Slots& slots) {
  ArrivalProcess arrivals(options.request_rate, options.burstiness, options.seed);
  std::vector<std::jthread> in_flight;
  in_flight.reserve(requests.size());
  double next_s = 0.0;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (i > 0) next_s += arrivals.next_gap_s();
    const auto when = start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(next_s));
    if (options.duration_s > 0 && next_s >= options.duration_s) break;
    std::this_thread::sleep_until(when);
    in_flight.emplace_back([&, i] { send_one(backend, requests[i], slots, i, start); });
  }
}

// `concurrency` workers, each sending its next request as soon as the last one finished.
void run_closed_loop(Backend& backend, const std::vector<BenchRequest>& requests, const RunOptions& options,
                     clock::time_point start, Slots& slots) {
  std::atomic<size_t> next{0};
  std::vector<std::jthread> workers;
  const auto num_workers = std::min<size_t>(size_t(options.concurrency), requests.size());
  for (size_t w = 0; w < num_workers; ++w) {
    workers.emplace_back([&] {
      for (size_t i; !past_deadline(start, options.duration_s) && (i = next.fetch_add(1)) < requests.size();) {
        send_one(backend, requests[i], slots, i, start);
      }
    });
  }
}

}  // namespace

RunResult run_benchmark(Backend& backend, const std::vector<BenchRequest>& requests, const RunOptions& options) {
  Slots slots(requests.size());
  const auto start = clock::now();
  RunResult run;
  {
    std::jthread progress = progress_thread(slots, int32_t(requests.size()), options.show_progress);
    if (options.concurrency > 0) {
      run_closed_loop(backend, requests, options, start, slots);
    } else {
      run_open_loop(backend, requests, options, start, slots);
    }
    run.duration_s = std::chrono::duration<double>(clock::now() - start).count();
  }
  for (auto& r : slots.results) {
    if (r) run.results.push_back(std::move(*r));
  }
  return run;
}

void log_first_errors(const std::vector<RequestResult>& results) {
  int shown = 0;
  for (const auto& r : results) {
    if (r.ok() || shown++ >= 3) continue;
    std::fprintf(stderr, "request failed (%s): %s\n", to_string(r.error), r.error_detail.c_str());
  }
}

}  // namespace flashserve::bench
