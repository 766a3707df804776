#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>

namespace flashserve {
namespace {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;
using prometheus::Registry;

// Whole requests: from a millisecond (a cached prompt, a one-token answer) to minutes (long
// generations, deep queues).
const Histogram::BucketBoundaries kRequestSeconds = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                                      1,     2.5,   5,    7.5,  10,   20,   40,   80,  160,  640, 2560};
// One token or one engine step: a decode step is milliseconds on a GPU, tens of them on a CPU.
const Histogram::BucketBoundaries kTokenSeconds = {0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025,
                                                    0.03,   0.04,  0.05,   0.075, 0.1,    0.15, 0.2,   0.3,  0.4,
                                                    0.5,    0.75,  1,      2.5,   5,      7.5,  10,    20,   40, 80};

// 1, 2, 5, 10, 20, 50, ... up to a million tokens: wider than any context window we serve.
Histogram::BucketBoundaries token_count_buckets() {
  Histogram::BucketBoundaries b;
  for (double decade = 1; decade < 1e6; decade *= 10) {
    for (double m : {1, 2, 5}) b.push_back(m * decade);
  }
  b.push_back(1e6);
  return b;
}

// A request aborted before it ran (or before its first token) has some timestamps never stamped,
// left at the clock's epoch; a difference with one of those is meaningless, so it is not observed.
std::optional<double> seconds_between(Clock::time_point from, Clock::time_point to) {
  const Clock::time_point unset{};
  if (from == unset || to == unset || to < from) return std::nullopt;
  return std::chrono::duration<double>(to - from).count();
}

void observe(Histogram& h, std::optional<double> value) {
  if (value) h.Observe(*value);
}

// The engine reports preemptions and prefix-cache lookups as running totals; the counters move by
// what changed since the last scrape. Two scrapes racing may arrive with their snapshots out of
// order: an older, smaller total is ignored rather than counted again later.
void advance_to(Counter& c, int64_t total, int64_t& seen) {
  if (total <= seen) return;
  c.Increment(double(total - seen));
  seen = total;
}

}  // namespace

struct Metrics::Impl {
  explicit Impl(const std::string& model_name);

  Histogram& histogram(const std::string& name, const std::string& help, const Histogram::BucketBoundaries& buckets);
  Counter& counter(const std::string& name, const std::string& help);
  Gauge& gauge(const std::string& name, const std::string& help);

  void observe_tokens(const RequestOutput& o);
  void observe_finish(const RequestOutput& o);
  void refresh(const EngineStats& s);

  Registry registry;
  const Labels labels;  // model_name, on every family

  Histogram& time_to_first_token;
  Histogram& inter_token_latency;
  Histogram& time_per_output_token;
  Histogram& e2e_latency;
  Histogram& queue_time;
  Histogram& prefill_time;
  Histogram& decode_time;
  Histogram& request_prompt_tokens;
  Histogram& request_generation_tokens;
  Histogram& iteration_tokens;
  Histogram& step_duration;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  std::array<Counter*, 3> request_success{};  // indexed by FinishReason
  prometheus::Family<Counter>* rejected = nullptr;  // by reason; series added as reasons appear
  Counter& preemptions;
  Counter& prefix_cache_queries;
  Counter& prefix_cache_hits;
  Counter& spec_drafts;
  Counter& spec_draft_tokens;
  Counter& spec_accepted_tokens;
  std::vector<Counter*> spec_accepted_per_pos;  // by draft position
  Gauge& requests_running;
  Gauge& requests_waiting;
  Gauge& kv_cache_usage;

  // Output thread only: when each streaming request produced its latest token.
  std::unordered_map<std::string, Clock::time_point> last_token_at;

  // Scrapes may come from several HTTP threads at once.
  std::mutex refresh_mu;
  int64_t seen_preemptions = 0;
  int64_t seen_prefix_queries = 0;
  int64_t seen_prefix_hits = 0;
  SpeculationStats seen_speculation;
};

Metrics::Impl::Impl(const std::string& model_name)
    : labels{{"model_name", model_name}},
      time_to_first_token(histogram("flashserve_time_to_first_token_seconds",
                                    "Time from arrival (before tokenization) to the first output token.",
                                    kRequestSeconds)),
      inter_token_latency(histogram("flashserve_inter_token_latency_seconds",
                                    "Time between two consecutive output tokens of a request.", kTokenSeconds)),
      time_per_output_token(histogram("flashserve_request_time_per_output_token_seconds",
                                      "Per finished request: decode time over output tokens after the first.",
                                      kTokenSeconds)),
      e2e_latency(histogram("flashserve_e2e_request_latency_seconds", "Time from arrival to finish, per request.",
                            kRequestSeconds)),
      queue_time(histogram("flashserve_request_queue_time_seconds",
                           "Time from arrival to the first step that ran any of the request.", kRequestSeconds)),
      prefill_time(histogram("flashserve_request_prefill_time_seconds",
                             "Time from the first scheduled step to the first output token.", kRequestSeconds)),
      decode_time(histogram("flashserve_request_decode_time_seconds",
                            "Time from the first to the last output token.", kRequestSeconds)),
      request_prompt_tokens(histogram("flashserve_request_prompt_tokens", "Prompt tokens per finished request.",
                                      token_count_buckets())),
      request_generation_tokens(histogram("flashserve_request_generation_tokens",
                                          "Output tokens per finished request.", token_count_buckets())),
      iteration_tokens(histogram("flashserve_iteration_tokens_total", "Tokens scheduled per engine step.",
                                 token_count_buckets())),
      step_duration(histogram("flashserve_engine_step_duration_seconds",
                              "Wall time of one engine step (schedule, forward, sample, update).", kTokenSeconds)),
      prompt_tokens(counter("flashserve_prompt_tokens_total",
                            "Prompt tokens of finished requests (aborted ones included), counted at finish.")),
      generation_tokens(counter("flashserve_generation_tokens_total", "Output tokens, counted as each is produced.")),
      preemptions(counter("flashserve_num_preemptions_total", "Requests preempted for lack of KV blocks.")),
      prefix_cache_queries(counter("flashserve_prefix_cache_queries_total",
                                   "Prompt tokens looked up in the prefix cache.")),
      prefix_cache_hits(counter("flashserve_prefix_cache_hits_total", "Prompt tokens found in the prefix cache.")),
      spec_drafts(counter("flashserve_spec_decode_num_drafts_total",
                          "Speculative verifications: a sequence's step that carried drafts.")),
      spec_draft_tokens(counter("flashserve_spec_decode_num_draft_tokens_total", "Draft tokens verified.")),
      spec_accepted_tokens(counter("flashserve_spec_decode_num_accepted_tokens_total",
                                   "Draft tokens accepted (the mean acceptance length is 1 + accepted / drafts).")),
      requests_running(gauge("flashserve_num_requests_running", "Requests in the running batch.")),
      requests_waiting(gauge("flashserve_num_requests_waiting", "Requests waiting to be scheduled.")),
      kv_cache_usage(gauge("flashserve_kv_cache_usage_perc", "Fraction of KV cache blocks in use (1 = full).")) {
  auto& success = prometheus::BuildCounter()
                      .Name("flashserve_request_success_total")
                      .Help("Finished requests by finish reason (stop, length, abort).")
                      .Labels(labels)
                      .Register(registry);
  // Every reason exists from the start, at 0, so rate() and alerts see the series before the first one.
  for (FinishReason r : {FinishReason::Stop, FinishReason::Length, FinishReason::Abort}) {
    request_success[size_t(r)] = &success.Add({{"finished_reason", std::string(to_string(r))}});
  }
  auto& per_pos = prometheus::BuildCounter()
                      .Name("flashserve_spec_decode_num_accepted_tokens_per_pos_total")
                      .Help("Draft tokens accepted, by their position in the draft (0 first).")
                      .Labels(labels)
                      .Register(registry);
  for (int32_t p = 0; p < kMaxSpeculativeTokens; ++p) spec_accepted_per_pos.push_back(&per_pos.Add({{"position", std::to_string(p)}}));
  rejected = &prometheus::BuildCounter()
                  .Name("flashserve_request_rejected_total")
                  .Help("Requests the server refused (at the door or at submission) or dropped before they could "
                        "finish (queue limit, deadline, shutdown), by reason.")
                  .Labels(labels)
                  .Register(registry);
  // The reasons an operator alerts on exist from the start, at 0.
  for (ErrorKind k : {ErrorKind::Invalid, ErrorKind::TooLong, ErrorKind::Overloaded, ErrorKind::Deadline,
                      ErrorKind::Unavailable, ErrorKind::Internal}) {
    rejected->Add({{"reason", std::string(to_string(k))}});
  }
}

Histogram& Metrics::Impl::histogram(const std::string& name, const std::string& help,
                                    const Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Labels(labels).Register(registry).Add({}, buckets);
}

Counter& Metrics::Impl::counter(const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Labels(labels).Register(registry).Add({});
}

Gauge& Metrics::Impl::gauge(const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Labels(labels).Register(registry).Add({});
}

void Metrics::Impl::observe_tokens(const RequestOutput& o) {
  if (o.tokens.empty()) return;
  generation_tokens.Increment(double(o.tokens.size()));
  // One observation per event, as vLLM takes one per step: a verified draft brings several tokens
  // at once, stamped as the request's last_token.
  const Clock::time_point now = o.timings.last_token;
  auto [it, first] = last_token_at.try_emplace(o.req_id, now);
  if (first) {
    observe(time_to_first_token, seconds_between(o.timings.arrival, o.timings.first_token));
  } else {
    observe(inter_token_latency, seconds_between(it->second, now));
    it->second = now;
  }
}

void Metrics::Impl::observe_finish(const RequestOutput& o) {
  last_token_at.erase(o.req_id);
  if (o.error) rejected->Add({{"reason", std::string(to_string(o.error->kind))}}).Increment();
  const RequestTimings& t = o.timings;
  request_success[size_t(*o.finish)]->Increment();
  prompt_tokens.Increment(o.num_prompt_tokens);
  request_prompt_tokens.Observe(o.num_prompt_tokens);
  request_generation_tokens.Observe(o.num_output_tokens);
  observe(e2e_latency, seconds_between(t.arrival, t.finished));
  observe(queue_time, seconds_between(t.arrival, t.first_scheduled));
  observe(prefill_time, seconds_between(t.first_scheduled, t.first_token));
  observe(decode_time, seconds_between(t.first_token, t.last_token));
  if (o.num_output_tokens > 1) {
    if (auto decode = seconds_between(t.first_token, t.last_token)) {
      time_per_output_token.Observe(*decode / (o.num_output_tokens - 1));
    }
  }
}

void Metrics::Impl::refresh(const EngineStats& s) {
  std::lock_guard lock(refresh_mu);
  requests_running.Set(s.num_running);
  requests_waiting.Set(s.num_waiting);  // front-end queues added by the caller (see render())
  const int32_t used = s.num_kv_blocks - s.num_free_kv_blocks;
  kv_cache_usage.Set(s.num_kv_blocks > 0 ? double(used) / s.num_kv_blocks : 0.0);
  advance_to(preemptions, s.num_preemptions, seen_preemptions);
  advance_to(prefix_cache_queries, s.prefix_cache.queried_tokens, seen_prefix_queries);
  advance_to(prefix_cache_hits, s.prefix_cache.hit_tokens, seen_prefix_hits);
  const SpeculationStats& spec = s.speculation;
  advance_to(spec_drafts, spec.num_drafts, seen_speculation.num_drafts);
  advance_to(spec_draft_tokens, spec.num_draft_tokens, seen_speculation.num_draft_tokens);
  advance_to(spec_accepted_tokens, spec.num_accepted_tokens, seen_speculation.num_accepted_tokens);
  for (size_t p = 0; p < spec_accepted_per_pos.size(); ++p) {
    advance_to(*spec_accepted_per_pos[p], spec.accepted_per_position[p], seen_speculation.accepted_per_position[p]);
  }
}

Metrics::Metrics(std::string model_name) : impl_(std::make_unique<Impl>(model_name)) {}

Metrics::~Metrics() = default;

void Metrics::on_output(const RequestOutput& o) {
  impl_->observe_tokens(o);  // a finishing event may carry the last token: count it first
  if (o.finish) impl_->observe_finish(o);
}

void Metrics::on_rejected(std::string_view reason) {
  // prometheus-cpp's families are thread-safe; Add() returns the existing series for known labels.
  impl_->rejected->Add({{"reason", std::string(reason)}}).Increment();
}

void Metrics::on_step(const StepStats& s) {
  impl_->iteration_tokens.Observe(s.num_batched_tokens);
  impl_->step_duration.Observe(s.seconds);
}

std::string Metrics::render(const EngineStats& stats) {
  impl_->refresh(stats);
  return prometheus::TextSerializer().Serialize(impl_->registry.Collect());
}

}  // namespace flashserve
