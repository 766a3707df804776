#include "scheduler/engine.h"

#include <algorithm>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "model/tokenizer.h"

namespace flashserve {
namespace {

EngineConfig with_defaults(EngineConfig cfg, const ModelRunner& runner) {
  if (cfg.scheduler.max_model_len == 0) cfg.scheduler.max_model_len = runner.context_len();
  return cfg;
}

// splitmix64: decorrelates consecutive per-request seeds.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Sequences that sample this step send their sampler's steps along, one per row (a verified
// sequence's last real token and each draft): the runner returns tokens. The runner keeps each
// sequence's block tables, so only what they gained travels.
ForwardBatch build_batch(SchedulerOutput& out) {
  ForwardBatch batch;
  batch.seqs.reserve(out.scheduled.size());
  batch.released = std::move(out.released_copies);
  for (ScheduledRequest& s : out.scheduled) {
    Request& r = *s.req;
    const auto first = r.token_ids.begin() + r.num_computed_tokens;
    const int32_t known = s.num_scheduled_tokens - int32_t(s.drafts.size());
    SequenceInput& q = batch.seqs.emplace_back();
    q.num_computed_tokens = r.num_computed_tokens;
    q.token_ids.assign(first, first + known);
    q.token_ids.insert(q.token_ids.end(), s.drafts.begin(), s.drafts.end());
    q.block_tables = std::move(s.tables.new_blocks);
    q.logits = s.samples ? LogitRows::Last : LogitRows::None;
    q.kept_id = s.tables.copy_id;
    q.hidden = r.pooled.has_value();
    if (!s.samples) continue;
    q.sample = int32_t(batch.samples.size());
    q.last_rows = 1 + int32_t(s.drafts.size());
    r.sampler.append_steps(s.drafts, batch.samples);
  }
  return batch;
}

}  // namespace

Engine::Engine(ModelRunner& runner, const Tokenizer& tok, EngineConfig cfg)
    : runner_(runner),
      end_ids_(tok.end_of_generation_ids()),
      cfg_(with_defaults(std::move(cfg), runner)),
      kv_(runner.num_kv_blocks(), runner.block_size(), cfg_.enable_prefix_caching, runner.kv_group_windows()),
      scheduler_(cfg_.scheduler, kv_),
      budget_(cfg_.max_step_seconds, cfg_.max_step_decode_ratio, cfg_.scheduler.max_num_batched_tokens),
      seed_base_(std::random_device{}()) {
  publish_stats(false);
}

Engine::~Engine() { stop(); }

std::optional<RequestError> Engine::check(const GenerateRequest& g) const {
  if (auto error = validate(g.params, runner_.vocab_size())) return RequestError{ErrorKind::Invalid, *error};
  if (g.pooling == Pooling::Rank) return RequestError{ErrorKind::Invalid, "rank pooling scores pairs; it makes no embedding"};
  if (g.pooling && g.prompt_ids.empty()) return RequestError{ErrorKind::Invalid, "an embedding needs at least one token"};
  if (auto error = validate(g.speculative)) return RequestError{ErrorKind::Invalid, *error};
  for (int32_t t : g.prompt_ids) {
    if (t < 0 || t >= runner_.vocab_size()) {
      return RequestError{ErrorKind::Invalid, "prompt token id " + std::to_string(t) + " is out of range"};
    }
  }
  return scheduler_.check_fits(int64_t(g.prompt_ids.size()), g.params.max_tokens);
}

std::optional<RequestError> Engine::submit(GenerateRequest req, OutputCallback on_output) {
  std::vector<Submission> batch;
  batch.push_back({std::move(req), std::move(on_output)});
  return submit(std::move(batch));
}

std::optional<RequestError> Engine::submit(std::vector<Submission> batch) {
  for (const Submission& s : batch) {
    if (auto error = check(s.req)) return error;
  }
  const int32_t n = int32_t(batch.size());
  if (n > cfg_.max_waiting) {
    // Refused as a bad request, not as overload: retrying later cannot help.
    return RequestError{ErrorKind::Invalid, "the request asks for " + std::to_string(n) +
                                                " sequences (prompts x n); this server queues at most " +
                                                std::to_string(cfg_.max_waiting)};
  }
  std::lock_guard lock(mu_);
  if (num_not_started_ + n > cfg_.max_waiting) {
    return RequestError{ErrorKind::Overloaded, "server overloaded: " + std::to_string(num_not_started_) +
                                                   " requests already waiting (limit " +
                                                   std::to_string(cfg_.max_waiting) + ")"};
  }
  Clock::time_point deadline = Clock::time_point::max();
  for (const Submission& s : batch) deadline = std::min(deadline, s.req.deadline);
  if (auto error = check_backlog(n, deadline)) return error;
  num_not_started_ += n;
  for (Submission& s : batch) {
    s.req.params.end_ids = end_ids_;
    const uint64_t seed = mix(seed_base_ + num_submitted_++);
    auto req = std::make_unique<Request>(std::move(s.req), seed);
    if (cfg_.max_queue_time > Clock::duration::zero()) req->start_deadline = req->timings.arrival + cfg_.max_queue_time;
    req->on_output = std::move(s.on_output);
    inbox_.push_back(std::move(req));
  }
  wake_.notify_one();
  return std::nullopt;
}

// With mu_ held. Only with a queue: a request that would start at once is never refused. The limit
// is the server's queue time, or the client's deadline when that comes sooner.
std::optional<RequestError> Engine::check_backlog(int32_t n, Clock::time_point deadline) const {
  const double queue_limit = std::chrono::duration<double>(cfg_.max_queue_time).count();
  const bool has_deadline = deadline != Clock::time_point::max();
  const double client_limit = has_deadline ? std::chrono::duration<double>(deadline - Clock::now()).count() : 0;
  if (num_not_started_ == 0 || (queue_limit <= 0 && !has_deadline)) return std::nullopt;
  const bool client_first = has_deadline && (queue_limit <= 0 || client_limit < queue_limit);
  const double limit = client_first ? client_limit : queue_limit;
  const double wait = backlog_.predicted_wait(num_not_started_ + n);
  // 0: no prediction yet. A deadline already past is left to the scheduler (DEADLINE_EXCEEDED).
  if (wait == 0 || wait <= limit) return std::nullopt;
  char text[200];
  std::snprintf(text, sizeof(text),
                "server overloaded: the %d requests queued ahead would keep this one waiting about %.0f s, "
                "past %s of %.0f s; retry later",
                num_not_started_, std::min(wait, 1e6),
                client_first ? "the request's deadline" : "the server's queue limit", std::max(limit, 0.0));
  return RequestError{ErrorKind::Overloaded, text};
}

void Engine::cancel(const std::string& req_id) {
  std::lock_guard lock(mu_);
  cancels_.push_back(req_id);
  wake_.notify_one();
}

void Engine::abort_all(RequestError error) {
  std::lock_guard lock(mu_);
  abort_all_ = std::move(error);
  wake_.notify_one();
}

void Engine::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  abort_all(RequestError{ErrorKind::Unavailable, "the server is shutting down"});
  drain_inbox();
}

void Engine::loop() {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      stats_.heartbeat = Clock::now();
      if (stopping_) return;
      if (inbox_.empty() && cancels_.empty() && !abort_all_ && !scheduler_.has_work()) {
        wake_.wait_for(lock, std::chrono::milliseconds(100));
        continue;
      }
    }
    step();
  }
}

bool Engine::step() {
  drain_inbox();
  const auto t0 = Clock::now();
  const bool backlog = scheduler_.num_waiting() > 0;
  const int32_t decoding = scheduler_.num_decoding();
  const double pinned = cfg_.scheduler.speculative.min_acceptance;
  SchedulerOutput out = scheduler_.schedule(
      budget_.next(decoding), pinned > 0 ? pinned : budget_.draft_threshold(decoding, Scheduler::kDefaultMinAcceptance));
  if (out.empty()) {
    publish_stats(false);
    return false;
  }
  report_dropped(out);
  if (out.scheduled.empty()) return true;
  run_batch(out);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  budget_.observe(out.num_batched_tokens, seconds);
  if (backlog) {
    std::lock_guard lock(mu_);
    backlog_.observe(seconds, out.num_started);
  }
  if (on_step_) on_step_({seconds, int32_t(out.scheduled.size()), out.num_batched_tokens, out.num_preempted});
  return true;
}

void Engine::drain_inbox() {
  std::vector<std::unique_ptr<Request>> inbox;
  std::vector<std::string> cancels;
  std::optional<RequestError> abort_all;
  {
    std::lock_guard lock(mu_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
    abort_all.swap(abort_all_);
  }
  for (std::unique_ptr<Request>& r : inbox) scheduler_.add(std::move(r));
  std::vector<Request*> aborted;
  for (const std::string& id : cancels) {
    if (Request* r = scheduler_.abort(id)) aborted.push_back(r);
  }
  if (abort_all) {
    for (Request* r : scheduler_.abort_all()) {
      r->error = abort_all;
      aborted.push_back(r);
    }
  }
  if (aborted.empty()) return;
  int32_t never_started = 0;
  for (Request* r : aborted) never_started += !r->scheduled_before;
  {
    std::lock_guard lock(mu_);
    num_not_started_ -= never_started;
  }
  publish_stats(false);  // so whoever hears of the abort sees its blocks already free
  for (Request* r : aborted) emit(*r, {});
}

void Engine::report_dropped(const SchedulerOutput& out) {
  int32_t never_started = out.num_started;
  for (Request* r : out.dropped) never_started += !r->scheduled_before;
  {
    std::lock_guard lock(mu_);
    num_not_started_ -= never_started;
  }
  if (out.dropped.empty()) return;
  publish_stats(false);
  for (Request* r : out.dropped) emit(*r, {});
}

void Engine::run_batch(SchedulerOutput& out) {
  ForwardOutput logits;
  const ForwardBatch batch = build_batch(out);
  try {
    logits = runner_.forward(batch);
    pool_hidden_rows(out, logits);
  } catch (const std::exception& e) {
    // A plan the model refuses is our bug, not the client's: fail those requests, keep serving.
    std::vector<Request*> failed;
    for (const ScheduledRequest& s : out.scheduled) {
      if (Request* r = scheduler_.abort(s.req->req_id)) {
        r->error = RequestError{ErrorKind::Internal, std::string("internal error: ") + e.what()};
        failed.push_back(r);
      }
    }
    publish_stats(true);
    for (Request* r : failed) emit(*r, {});
    return;
  }
  // build_batch asked for the rows in schedule order: the runner's tokens are already as update takes them.
  std::vector<RequestUpdate> updates = scheduler_.update(out, logits.tokens);
  publish_stats(true);  // before anyone hears of a finish, its blocks show as free
  for (RequestUpdate& u : updates) {
    if (u.tokens.empty() && !u.req->finish) continue;  // a prefill chunk: nothing to report yet
    RequestOutput o;
    o.tokens = std::move(u.tokens);
    emit(*u.req, std::move(o));
  }
}

// Embedding requests take this step's hidden rows into their pooling.
void Engine::pool_hidden_rows(const SchedulerOutput& out, const ForwardOutput& forward) {
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    if (!s.req->pooled) continue;
    if (i >= forward.hidden.size() || forward.hidden[i].size() != size_t(s.num_scheduled_tokens) * size_t(forward.dim)) {
      throw std::runtime_error("the runner returned no hidden states for an embedding request");
    }
    s.req->pooled->add(forward.hidden[i].data(), s.num_scheduled_tokens, forward.dim, s.req->num_computed_tokens);
  }
}

void Engine::emit(Request& r, RequestOutput o) {
  o.req_id = r.req_id;
  o.finish = r.finish;
  o.num_prompt_tokens = r.num_prompt_tokens;
  o.num_output_tokens = r.num_output_tokens();
  o.num_cached_tokens = r.num_cached_tokens;
  o.num_preemptions = r.num_preemptions;
  o.error = r.error;
  o.timings = r.timings;
  if (r.pooled && r.finish == FinishReason::Stop) o.embedding = r.pooled->embedding();
  if (!r.on_output) return;
  r.on_output(o);
  if (r.finish) r.on_output = nullptr;  // let go of what it holds now, not when the request is destroyed
}

void Engine::publish_stats(bool stepped) {
  std::lock_guard lock(mu_);
  stats_.num_running = scheduler_.num_running();
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.num_kv_blocks = kv_.num_blocks();
  stats_.num_free_kv_blocks = kv_.num_free_blocks();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.prefix_cache = kv_.prefix_stats();
  stats_.speculation = scheduler_.speculation_stats();
  stats_.num_steps += stepped;
  stats_.heartbeat = Clock::now();
}

int32_t Engine::max_model_len() const {
  return kv_.max_tokens_per_sequence(cfg_.scheduler.max_num_batched_tokens, cfg_.scheduler.max_model_len);
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  EngineStats s = stats_;
  s.num_not_started = num_not_started_;  // live: it moves on submit too, not only on steps
  return s;
}

}  // namespace flashserve
