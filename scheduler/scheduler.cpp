#include "scheduler/scheduler.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace flashserve {

std::string_view to_string(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
  }
  return "unknown";
}

std::string_view to_string(ErrorKind k) {
  switch (k) {
    case ErrorKind::Invalid: return "invalid";
    case ErrorKind::TooLong: return "too_long";
    case ErrorKind::Overloaded: return "overloaded";
    case ErrorKind::Deadline: return "deadline";
    case ErrorKind::Unavailable: return "unavailable";
    case ErrorKind::Internal: return "internal";
  }
  return "unknown";
}

Request::Request(GenerateRequest g, uint64_t fallback_seed)
    : req_id(std::move(g.req_id)),
      priority(g.priority),
      token_ids(std::move(g.prompt_ids)),
      num_prompt_tokens(int32_t(token_ids.size())),
      params(std::move(g.params)),
      sampler(params, token_ids, fallback_seed),
      deadline(g.deadline),
      speculative(g.speculative) {
  timings.arrival = g.arrival;
  if (g.pooling) pooled.emplace(*g.pooling, num_prompt_tokens);
}

Scheduler::Scheduler(SchedulerConfig cfg, KvCacheManager& kv) : cfg_(cfg), kv_(kv), speculator_(cfg.speculative) {}

bool Scheduler::before(const Request& a, const Request& b) const {
  if (cfg_.priority_scheduling && a.priority != b.priority) return a.priority < b.priority;
  return a.arrival_order < b.arrival_order;
}

// In 64 bits: a client may send max_tokens near INT32_MAX, and the sum must not wrap into range.
std::optional<RequestError> Scheduler::check_fits(int64_t num_prompt_tokens, int64_t max_tokens) const {
  if (num_prompt_tokens <= 0) return RequestError{ErrorKind::Invalid, "the prompt is empty"};
  const int64_t total = num_prompt_tokens + max_tokens;
  if (total > cfg_.max_model_len) {
    return RequestError{ErrorKind::TooLong, "prompt (" + std::to_string(num_prompt_tokens) + " tokens) plus max_tokens (" +
                                                std::to_string(max_tokens) + ") exceeds the context window of " +
                                                std::to_string(cfg_.max_model_len) + " tokens"};
  }
  const int64_t blocks = kv_.peak_blocks(total, cfg_.max_num_batched_tokens);
  if (blocks > kv_.num_blocks()) {
    return RequestError{ErrorKind::TooLong, "prompt plus max_tokens (" + std::to_string(total) + " tokens) needs " +
                                                std::to_string(blocks) + " KV blocks; the cache has " +
                                                std::to_string(kv_.num_blocks())};
  }
  return std::nullopt;
}

void Scheduler::add(std::unique_ptr<Request> req) {
  req->arrival_order = next_arrival_++;
  req->drafting = speculator_.start(req->speculative);
  insert_waiting(std::move(req));
}

void Scheduler::insert_waiting(std::unique_ptr<Request> req) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), req,
                              [this](const auto& a, const auto& b) { return before(*a, *b); });
  waiting_.insert(pos, std::move(req));
}

SchedulerOutput Scheduler::schedule() { return schedule(cfg_.max_num_batched_tokens); }

SchedulerOutput Scheduler::schedule(int32_t token_budget) { return schedule(token_budget, kDefaultMinAcceptance); }

int32_t Scheduler::num_decoding() const {
  return int32_t(std::count_if(running_.begin(), running_.end(), [](const auto& r) { return r->num_output_tokens() > 0; }));
}

SchedulerOutput Scheduler::schedule(int32_t token_budget, double min_draft_acceptance) {
  finished_.clear();
  SchedulerOutput out;
  const auto now = Clock::now();
  drop_expired(out, now);
  token_budget = std::clamp(token_budget, 1, cfg_.max_num_batched_tokens);
  int32_t budget = token_budget;
  schedule_running(out, budget);
  add_drafts(out, budget, min_draft_acceptance);
  // Admitting new work in a step that had to preempt would only preempt again.
  if (out.num_preempted == 0) schedule_waiting(out, budget);
  out.num_batched_tokens = token_budget - budget;
  even_out_drafts(out);
  for (ScheduledRequest& s : out.scheduled) {
    if (!s.req->scheduled_before) {
      s.req->timings.first_scheduled = now;
      ++out.num_started;
    }
    s.req->scheduled_before = true;
    s.tables = kv_.take_table_delta(s.req->kv);
  }
  // Kept until a step runs: only a step reaches the runner.
  if (!out.scheduled.empty()) out.released_copies = kv_.take_released_copies();
  return out;
}

// Work for a client that has given up, or that waited past the server's queue limit, is dropped
// before any more of it is computed: under overload the steps go to requests that can still succeed.
void Scheduler::drop_expired(SchedulerOutput& out, Clock::time_point now) {
  auto drop_from = [&](auto& queue) {
    for (auto it = queue.begin(); it != queue.end();) {
      Request& r = **it;
      const bool past_deadline = now >= r.deadline;
      if (!past_deadline && (r.scheduled_before || now < r.start_deadline)) {
        ++it;
        continue;
      }
      RequestError e = past_deadline ? RequestError{ErrorKind::Deadline, "the request's deadline passed"}
                                     : RequestError{ErrorKind::Overloaded,
                                                    "server overloaded: the request waited longer than the server's "
                                                    "queue limit without starting"};
      std::unique_ptr<Request> owned = std::move(*it);
      it = queue.erase(it);
      drop(std::move(owned), std::move(e), out);
    }
  };
  drop_from(running_);
  drop_from(waiting_);
}

void Scheduler::drop(std::unique_ptr<Request> r, RequestError error, SchedulerOutput& out) {
  r->error = std::move(error);
  finish(*r, FinishReason::Abort);
  out.dropped.push_back(r.get());
  finished_.push_back(std::move(r));
}

void Scheduler::schedule_running(SchedulerOutput& out, int32_t& budget) {
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request& r = *running_[i];
    const int32_t n = std::min(r.num_tokens() - r.num_computed_tokens, budget);
    bool fits = kv_.allocate(r.kv, r.num_computed_tokens + n, r.num_computed_tokens);
    // Make room by preempting from the back (lowest priority, latest arrival), r itself last.
    while (!fits) {
      const bool self = running_.back().get() == &r;
      std::unique_ptr<Request> victim = std::move(running_.back());
      running_.pop_back();
      if (self && running_.empty()) {
        // Alone and still out of blocks: requeued, it would hold the head of the queue forever.
        drop(std::move(victim), never_fits(r), out);
        return;
      }
      preempt(std::move(victim));
      ++out.num_preempted;
      if (self) return;
      fits = kv_.allocate(r.kv, r.num_computed_tokens + n, r.num_computed_tokens);
    }
    out.scheduled.push_back({&r, n, r.generates() && r.num_computed_tokens + n == r.num_tokens(), {}, {}});
    budget -= n;
    ++i;
  }
}

// Once every running request has its own tokens, decoding ones may add drafts, each worth its row
// at `min_acceptance`, out of the step's budget and only into free blocks: a draft never preempts.
void Scheduler::add_drafts(SchedulerOutput& out, int32_t& budget, double min_acceptance) {
  for (ScheduledRequest& s : out.scheduled) {
    Request& r = *s.req;
    const bool decoding = s.samples && s.num_scheduled_tokens == 1 && r.num_output_tokens() > 0;
    if (budget <= 0 || !decoding) continue;
    // Never more than the output may still grow by after this step's own token: verification stays
    // within max_tokens and the blocks admission counted.
    const int32_t limit = std::min(budget, r.params.max_tokens - r.num_output_tokens() - 1);
    std::vector<int32_t> drafts = speculator_.propose(r.drafting, r.token_ids, limit, min_acceptance);
    const int32_t n = int32_t(drafts.size());
    if (n == 0 || !kv_.allocate(r.kv, r.num_tokens() + n, r.num_computed_tokens)) continue;
    s.num_scheduled_tokens += n;
    s.drafts = std::move(drafts);
    budget -= n;
  }
}

// The CPU's matmul takes a step's tokens in tiles of 8, 4 and 2, and an odd one out passes the
// weights again on its own (BM_Verify: 2 drafts cost about three times what 1 does over a plain
// step): an odd step gives up its last draft, the least likely to be kept.
void Scheduler::even_out_drafts(SchedulerOutput& out) {
  if (out.num_batched_tokens % 2 == 0) return;
  for (auto it = out.scheduled.rbegin(); it != out.scheduled.rend(); ++it) {
    if (it->drafts.empty()) continue;
    it->drafts.pop_back();
    --it->num_scheduled_tokens;
    --out.num_batched_tokens;
    return;
  }
}

RequestError Scheduler::never_fits(const Request& r) const {
  return RequestError{ErrorKind::TooLong, "the request needs more KV blocks than the whole cache holds (" +
                                              std::to_string(kv_.num_blocks()) + " blocks of " +
                                              std::to_string(kv_.block_size()) + " tokens) at " +
                                              std::to_string(r.num_tokens()) + " tokens"};
}

void Scheduler::schedule_waiting(SchedulerOutput& out, int32_t& budget) {
  while (!waiting_.empty() && budget > 0 && int32_t(running_.size()) < cfg_.max_num_seqs) {
    Request& r = *waiting_.front();
    // Mean and first-token pooling read every prompt position's hidden state: nothing is skipped.
    const bool whole_prompt = r.pooled && r.pooled->pooling() != Pooling::Last;
    r.num_computed_tokens = whole_prompt ? 0 : kv_.acquire_cached_prefix(r.kv, r.token_ids);
    if (!r.scheduled_before) r.num_cached_tokens = r.num_computed_tokens;
    const int32_t n = std::min(r.num_tokens() - r.num_computed_tokens, budget);
    if (!kv_.allocate(r.kv, r.num_computed_tokens + n, r.num_computed_tokens)) {
      kv_.free(r.kv);  // don't pin cached blocks while it waits
      r.num_computed_tokens = 0;
      if (running_.empty()) {
        // Every block is free and it still does not fit: it never will, and FCFS would let it
        // block everyone behind it.
        std::unique_ptr<Request> owned = std::move(waiting_.front());
        waiting_.pop_front();
        drop(std::move(owned), never_fits(r), out);
        continue;
      }
      return;  // FCFS: nobody overtakes the head of the queue, so big requests cannot starve
    }
    std::unique_ptr<Request> owned = std::move(waiting_.front());
    waiting_.pop_front();
    auto pos = std::upper_bound(running_.begin(), running_.end(), owned,
                                [this](const auto& a, const auto& b) { return before(*a, *b); });
    running_.insert(pos, std::move(owned));
    out.scheduled.push_back({&r, n, r.generates() && r.num_computed_tokens + n == r.num_tokens(), {}, {}});
    budget -= n;
  }
}

void Scheduler::preempt(std::unique_ptr<Request> victim) {
  kv_.free(victim->kv);
  victim->num_computed_tokens = 0;
  if (victim->pooled) victim->pooled->reset();
  ++victim->num_preemptions;
  ++num_preemptions_;
  insert_waiting(std::move(victim));
}

std::vector<RequestUpdate> Scheduler::update(const SchedulerOutput& output, const std::vector<SampledToken>& sampled) {
  std::vector<RequestUpdate> updates;
  updates.reserve(output.scheduled.size());
  const auto now = Clock::now();
  const std::span<const SampledToken> all(sampled);
  size_t next = 0;
  for (const ScheduledRequest& s : output.scheduled) {
    const size_t rows = s.samples ? 1 + s.drafts.size() : 0;
    if (next + rows > all.size()) throw std::logic_error("fewer sampled tokens than the step's rows");
    updates.push_back(advance(s, all.subspan(next, rows), now));
    next += rows;
  }
  retire_finished();
  return updates;
}

// Row k's token was sampled as if drafts 0 .. k-1 were right: tokens are kept up to the first
// that differs from its draft (that one included, as plain decoding would have sampled it) or
// that ends the request. Only the KV of confirmed drafts counts as computed, so blocks holding a
// rejected draft are neither published to the prefix cache nor read before they are rewritten.
RequestUpdate Scheduler::advance(const ScheduledRequest& s, std::span<const SampledToken> sampled,
                                 Clock::time_point now) {
  Request& r = *s.req;
  const int32_t num_drafts = int32_t(s.drafts.size());
  r.num_computed_tokens += s.num_scheduled_tokens - num_drafts;
  RequestUpdate u{&r, {}};
  std::optional<FinishReason> stop;
  int32_t accepted = 0;
  for (size_t k = 0; k < sampled.size() && !stop; ++k) {
    const SampledToken& t = sampled[k];
    r.token_ids.push_back(t.token);
    r.sampler.record(t.token);
    u.tokens.push_back(t);
    stop = check_stop(r, t.token);
    if (k == size_t(num_drafts) || t.token != s.drafts[k]) break;
    ++accepted;
  }
  r.num_computed_tokens += accepted;
  kv_.cache_full_blocks(r.kv, r.token_ids, r.num_computed_tokens);
  if (num_drafts > 0) speculator_.observe(r.drafting, num_drafts, accepted);
  if (r.pooled && r.num_computed_tokens == r.num_tokens()) finish(r, FinishReason::Stop);  // its prompt is pooled
  if (u.tokens.empty()) return u;

  if (r.num_output_tokens() == int32_t(u.tokens.size())) r.timings.first_token = now;
  r.timings.last_token = now;
  if (stop) finish(r, *stop);
  return u;
}

// Token-level rules only: stop strings are matched on the text, off the engine thread, and end the
// request by cancelling it.
std::optional<FinishReason> Scheduler::check_stop(const Request& r, int32_t token) const {
  auto among = [token](const std::vector<int32_t>& ids) { return std::find(ids.begin(), ids.end(), token) != ids.end(); };
  if ((!r.params.ignore_eos && among(r.params.end_ids)) || among(r.params.stop_token_ids)) {
    return FinishReason::Stop;
  }
  if (r.num_output_tokens() >= r.params.max_tokens) return FinishReason::Length;
  return std::nullopt;
}

void Scheduler::finish(Request& r, FinishReason reason) {
  r.finish = reason;
  speculator_.learn(r.drafting, std::span<const int32_t>(r.token_ids).subspan(size_t(r.num_prompt_tokens)));
  r.timings.finished = Clock::now();
  kv_.free(r.kv);
}

// Moves finished requests out of the queues; they live until the next schedule().
void Scheduler::retire_finished() {
  auto it = std::stable_partition(running_.begin(), running_.end(), [](const auto& r) { return !r->finish; });
  std::move(it, running_.end(), std::back_inserter(finished_));
  running_.erase(it, running_.end());
}

Request* Scheduler::abort(const std::string& req_id) {
  auto matches = [&](const auto& r) { return r->req_id == req_id && !r->finish; };
  auto retire = [&](auto& queue, auto it) {
    Request* r = it->get();
    finish(*r, FinishReason::Abort);
    finished_.push_back(std::move(*it));
    queue.erase(it);
    return r;
  };
  if (auto it = std::find_if(running_.begin(), running_.end(), matches); it != running_.end()) return retire(running_, it);
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), matches); it != waiting_.end()) return retire(waiting_, it);
  return nullptr;
}

std::vector<Request*> Scheduler::abort_all() {
  std::vector<Request*> aborted;
  auto retire = [&](std::unique_ptr<Request>& r) {
    finish(*r, FinishReason::Abort);
    aborted.push_back(r.get());
    finished_.push_back(std::move(r));
  };
  std::for_each(running_.begin(), running_.end(), retire);
  std::for_each(waiting_.begin(), waiting_.end(), retire);
  running_.clear();
  waiting_.clear();
  return aborted;
}

}  // namespace flashserve
