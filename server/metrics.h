// Prometheus metrics with vLLM's names and meanings (prefix flashserve_ instead of vllm:), so
// dashboards and alerts port by a prefix change. Every series carries model_name.
#pragma once
#include <memory>
#include <string>
#include "server/serving.h"

namespace flashserve {

class Metrics : public ServingObserver {
 public:
  explicit Metrics(std::string model_name);
  ~Metrics() override;

  // Output thread: per-token, per-request and per-step observations.
  void on_output(const RequestOutput& o) override;
  void on_step(const StepStats& s) override;
  // Any thread.
  void on_rejected(std::string_view reason) override;

  // Any thread: refreshes gauges and cumulative counters from `stats`, then renders the
  // Prometheus text exposition format. The caller adds requests waiting in front-end queues to
  // stats.num_waiting, so the waiting gauge (the autoscaling signal) sees every queue.
  std::string render(const EngineStats& stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
