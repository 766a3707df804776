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

  // Engine thread: per-token, per-request and per-step observations.
  void on_output(const RequestOutput& o) override;
  void on_step(const StepStats& s) override;

  // Any thread: refreshes gauges and cumulative counters from `stats`, then renders the
  // Prometheus text exposition format.
  std::string render(const EngineStats& stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace flashserve
