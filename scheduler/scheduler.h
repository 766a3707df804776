// Iteration-level scheduling (continuous batching). Every step: running requests first (one decode
// token each, or their next prompt chunk), then waiting ones in priority/arrival order, all under
// max_num_seqs and a token budget. When KV blocks run out, the lowest-priority, latest-arrived
// running request is preempted: its blocks are freed and it is recomputed later (its sampler state
// survives, so it produces exactly the tokens it would have). The scheduler never touches tensors.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include "scheduler/kv_cache_manager.h"
#include "scheduler/request.h"
#include "scheduler/speculation.h"

namespace flashserve {

struct SchedulerConfig {
  int32_t max_num_seqs = 64;             // running requests at most
  int32_t max_num_batched_tokens = 512;  // tokens per step; longer prompts are chunked
  int32_t max_model_len = 0;             // context window
  bool priority_scheduling = false;      // order by (priority, arrival) instead of arrival
  SpeculativeConfig speculative;
};

struct ScheduledRequest {
  Request* req;
  int32_t num_scheduled_tokens;  // tokens computed this step, drafts included
  bool samples;                  // reaches the end of the known tokens: a new token is sampled
  std::vector<int32_t> drafts;   // guessed tokens after the known ones, verified this step
  TableDelta tables;             // what the runner's copy of its block tables lacks
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;
  // Ended by the scheduler this step without running (deadline passed, can never fit), each with
  // its error set; valid until the next schedule().
  std::vector<Request*> dropped;
  // Block-table copies the runner drops before this step: their sequences were freed since the
  // last step that ran (finished, aborted, dropped or preempted).
  std::vector<int64_t> released_copies;
  int32_t num_batched_tokens = 0;
  int32_t num_preempted = 0;  // preemptions this step
  int32_t num_started = 0;    // requests scheduled for the first time this step
  bool empty() const { return scheduled.empty() && dropped.empty(); }
};

// One request's progress after a step, for the engine to report.
struct RequestUpdate {
  Request* req;
  std::vector<SampledToken> tokens;  // new this step: none, one, or with drafts up to all of them plus one
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig cfg, KvCacheManager& kv);

  // Whether a request can ever run: a prompt, and prompt + max_tokens within the context window and
  // the whole KV pool. Reads only constants, so any thread may ask.
  std::optional<RequestError> check_fits(int64_t num_prompt_tokens, int64_t max_tokens) const;
  // Queues an admissible request (see check_fits).
  void add(std::unique_ptr<Request> req);
  // Drops requests past their deadlines, then picks this step's batch of at most `token_budget`
  // tokens (max_num_batched_tokens when not given; the engine lowers it to keep steps short).
  // Speculative drafts join where their chance of being kept is at least `min_draft_acceptance`
  // (what a row costs as a share of a token: StepBudget::draft_threshold).
  SchedulerOutput schedule();
  SchedulerOutput schedule(int32_t token_budget);
  SchedulerOutput schedule(int32_t token_budget, double min_draft_acceptance);
  // Before any step was measured.
  static constexpr double kDefaultMinAcceptance = 0.25;
  // `sampled` holds, in schedule order, the sampled tokens of each scheduled request that samples:
  // one per draft plus one, in row order (the runner's ForwardOutput::tokens as the engine's batch
  // asks for them). Advances every scheduled request (keeps the drafts its tokens confirm, appends
  // its tokens, tells its sampler), applies stop rules, frees finished requests' blocks: everything
  // a sampled token changes, in one place. Returns updates in schedule order; finished requests
  // stay readable until the next schedule(), then are destroyed.
  std::vector<RequestUpdate> update(const SchedulerOutput& output, const std::vector<SampledToken>& sampled);
  // Finishes a request (Abort) and frees its blocks now. Returns it (valid until the next
  // schedule()), or nullptr if unknown or already finished.
  Request* abort(const std::string& req_id);
  // Aborts everything queued or running, e.g. at shutdown. Returns the aborted requests (valid
  // until the next schedule()).
  std::vector<Request*> abort_all();

  const SchedulerConfig& config() const { return cfg_; }
  int32_t num_running() const { return int32_t(running_.size()); }
  int32_t num_waiting() const { return int32_t(waiting_.size()); }
  // Running requests past their prompt: those a long step would keep waiting for their next token.
  int32_t num_decoding() const;
  int64_t num_preemptions() const { return num_preemptions_; }
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }
  const SpeculationStats& speculation_stats() const { return speculator_.stats(); }

 private:
  bool before(const Request& a, const Request& b) const;
  void drop_expired(SchedulerOutput& out, Clock::time_point now);
  void drop(std::unique_ptr<Request> r, RequestError error, SchedulerOutput& out);
  RequestError never_fits(const Request& r) const;
  void schedule_running(SchedulerOutput& out, int32_t& budget);
  void add_drafts(SchedulerOutput& out, int32_t& budget, double min_acceptance);
  void even_out_drafts(SchedulerOutput& out);
  void schedule_waiting(SchedulerOutput& out, int32_t& budget);
  void preempt(std::unique_ptr<Request> victim);
  void insert_waiting(std::unique_ptr<Request> req);
  void finish(Request& r, FinishReason reason);
  void retire_finished();
  std::optional<FinishReason> check_stop(const Request& r, int32_t token) const;
  RequestUpdate advance(const ScheduledRequest& s, std::span<const SampledToken> sampled, Clock::time_point now);

  SchedulerConfig cfg_;
  KvCacheManager& kv_;
  Speculator speculator_;
  std::deque<std::unique_ptr<Request>> waiting_;  // in service order
  std::vector<std::unique_ptr<Request>> running_; // in service order: preemption takes from the back
  std::vector<std::unique_ptr<Request>> finished_;
  int64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace flashserve
