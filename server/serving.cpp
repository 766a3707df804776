#include "server/serving.h"

#include <spdlog/spdlog.h>

namespace flashserve {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Seconds from `from` to `to`, or -1 when `to` never happened (e.g. aborted while still queued).
double span(Clock::time_point from, Clock::time_point to) { return to == Clock::time_point{} ? -1.0 : seconds(to - from); }

// One line per request at completion: what ops people grep for. -1 marks a stage never reached.
void log_finished(const RequestOutput& o) {
  const RequestTimings& t = o.timings;
  spdlog::info("request {} finished: reason={} prompt_tokens={} output_tokens={} cached_tokens={} preemptions={} "
               "queue={:.3f}s ttft={:.3f}s e2e={:.3f}s{}{}",
               o.req_id, to_string(*o.finish), o.num_prompt_tokens, o.num_output_tokens, o.num_cached_tokens,
               o.num_preemptions, span(t.arrival, t.first_scheduled), span(t.arrival, t.first_token),
               span(t.arrival, t.finished), o.error.empty() ? "" : " error=", o.error);
}

}  // namespace

void RequestStream::push(const RequestOutput& o) {
  std::lock_guard lock(mu_);
  events_.push_back(o);
  ready_.notify_one();
}

std::optional<RequestOutput> RequestStream::next(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (!ready_.wait_until(lock, deadline, [&] { return !events_.empty(); })) return std::nullopt;
  RequestOutput o = std::move(events_.front());
  events_.pop_front();
  return o;
}

Serving::Serving(const LlamaModel& model, std::string served_model_name, const EngineOptions& options,
                 ServingObserver* observer)
    : model_(model),
      model_name_(std::move(served_model_name)),
      observer_(observer),
      runner_(options.make_runner(model)),
      engine_(*runner_, model.tokenizer(), options.engine_config()) {
  try {
    template_ = std::make_unique<ChatTemplate>(model.chat_template());
  } catch (const UnsupportedTemplate& e) {
    template_error_ = e.what();
    spdlog::warn("chat completions disabled: {}", template_error_);
  }
  if (observer_) engine_.set_step_observer([this](const StepStats& s) { observer_->on_step(s); });
  spdlog::info("KV cache: {} blocks of {} tokens ({} tokens)", runner_->num_kv_blocks(), runner_->block_size(),
               int64_t(runner_->num_kv_blocks()) * runner_->block_size());
  engine_.start();
}

Serving::~Serving() { engine_.stop(); }

std::vector<int32_t> Serving::chat_prompt(const std::vector<ChatMessage>& messages) const {
  if (!template_) throw UnsupportedTemplate(template_error_);
  return model_.encode_chat(*template_, messages);
}

std::vector<int32_t> Serving::text_prompt(const std::string& text) const {
  return tokenizer().encode(text, /*add_special=*/true, /*parse_special=*/true);
}

SubmitResult Serving::submit(std::vector<int32_t> prompt_ids, SamplingParams params, Clock::time_point arrival,
                             int32_t priority) {
  if (draining_) return {nullptr, Rejection{RejectReason::Overloaded, "the server is shutting down"}, true};
  const std::string id = "req-" + std::to_string(next_id_++);
  auto stream = std::make_shared<RequestStream>(id);
  ++in_flight_;
  auto on_output = [this, stream](const RequestOutput& o) {
    if (observer_) observer_->on_output(o);
    if (o.finish) log_finished(o);
    stream->push(o);
    if (o.finish && --in_flight_ == 0) {
      std::lock_guard lock(idle_mu_);
      idle_.notify_all();
    }
  };
  if (auto rejected = engine_.submit({id, std::move(prompt_ids), std::move(params), priority, arrival}, on_output)) {
    --in_flight_;
    return {nullptr, rejected, false};
  }
  return {stream, std::nullopt, false};
}

void Serving::cancel(const std::string& req_id) { engine_.cancel(req_id); }


bool Serving::wait_idle(Clock::time_point deadline) {
  std::unique_lock lock(idle_mu_);
  return idle_.wait_until(lock, deadline, [&] { return in_flight_ == 0; });
}

bool Serving::ready(Clock::duration max_silence) const {
  return !draining_ && Clock::now() - engine_.stats().heartbeat < max_silence;
}

}  // namespace flashserve
