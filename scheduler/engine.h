// The engine loop: one thread owns the scheduler, the KV manager and the model runner, and repeats
// schedule -> forward -> sample -> update. Other threads only submit, cancel and read stats; every
// request's progress comes back through its callback, called on the engine thread.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include "model/model_runner.h"
#include "scheduler/backlog_rate.h"
#include "scheduler/scheduler.h"
#include "scheduler/step_budget.h"

namespace flashserve {

class Tokenizer;

struct EngineConfig {
  SchedulerConfig scheduler;     // max_model_len 0: the model's context window
  // Requests accepted but not yet started beyond this are refused as overload (exactly: a
  // request's choices are admitted all together or not at all).
  int32_t max_waiting = 1024;
  // A request that has not started this long after it arrived is dropped as overload (zero: never),
  // and one that the queue ahead of it would keep waiting longer is refused at once (backlog_rate.h).
  Clock::duration max_queue_time{};
  bool enable_prefix_caching = true;
  // While requests stream tokens, steps are cut to the tokens that fit this long (0: never cut;
  // scheduler/step_budget.h).
  double max_step_seconds = 0;
  // ...and to this many times the decode-only step of the streams at hand (0: no such bound).
  double max_step_decode_ratio = 0;
};

struct Submission {
  GenerateRequest req;
  OutputCallback on_output;
};

struct StepStats {
  double seconds = 0;
  int32_t num_seqs = 0;
  int32_t num_batched_tokens = 0;
  int32_t num_preempted = 0;
};

struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;          // in the scheduler's queue, preempted ones included
  int32_t num_not_started = 0;      // accepted, not yet started: what --max-waiting bounds
  int32_t num_kv_blocks = 0;
  int32_t num_free_kv_blocks = 0;
  int64_t num_preemptions = 0;
  int64_t num_steps = 0;
  PrefixCacheStats prefix_cache;
  SpeculationStats speculation;
  Clock::time_point heartbeat;  // the loop's last sign of life (it wakes at least every 100 ms)
};

class Engine {
 public:
  Engine(ModelRunner& runner, const Tokenizer& tok, EngineConfig cfg);
  ~Engine();

  // Thread-safe. Queues every request, or none and says why (invalid parameters, too long,
  // overloaded): the choices of one API request are admitted together.
  std::optional<RequestError> submit(std::vector<Submission> batch);
  std::optional<RequestError> submit(GenerateRequest req, OutputCallback on_output);
  // Thread-safe. The request finishes with Abort and frees its blocks at the next step.
  void cancel(const std::string& req_id);
  // Thread-safe. Everything queued or running finishes with Abort and `error` at the next step.
  void abort_all(RequestError error);

  void start();  // runs the loop on its own thread
  void stop();   // aborts everything still queued or running, then joins
  // One iteration on the calling thread (only when not started). False when there was nothing to do.
  bool step();

  EngineStats stats() const;
  // The longest sequence (prompt + output) one request may have: the context window, or what the
  // whole KV cache holds if that is less. Constant; any thread may ask.
  int32_t max_model_len() const;
  void set_step_observer(std::function<void(const StepStats&)> observer) { on_step_ = std::move(observer); }

 private:
  std::optional<RequestError> check(const GenerateRequest& g) const;
  std::optional<RequestError> check_backlog(int32_t n, Clock::time_point deadline) const;
  void loop();
  void drain_inbox();
  void report_dropped(const SchedulerOutput& out);
  // Moves the block-table deltas out of `out` into the runner's batch.
  void run_batch(SchedulerOutput& out);
  void pool_hidden_rows(const SchedulerOutput& out, const ForwardOutput& forward);
  void emit(Request& r, RequestOutput out);
  void publish_stats(bool stepped);

  ModelRunner& runner_;
  const std::vector<int32_t> end_ids_;  // the tokenizer's end-of-generation tokens, for every request
  EngineConfig cfg_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  StepBudget budget_;
  uint64_t seed_base_;
  uint64_t num_submitted_ = 0;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable wake_;
  std::vector<std::unique_ptr<Request>> inbox_;
  std::vector<std::string> cancels_;
  std::optional<RequestError> abort_all_;
  int32_t num_not_started_ = 0;  // in the inbox, or queued and never scheduled
  BacklogRate backlog_;
  EngineStats stats_;
  bool stopping_ = false;

  std::function<void(const StepStats&)> on_step_;
  std::thread thread_;
};

}  // namespace flashserve
