#include "scheduler/output_processor.h"

namespace flashserve {

OutputProcessor::OutputProcessor(Engine& engine, const Tokenizer& tok)
    : engine_(engine), tok_(tok), thread_([this] { run(); }) {}

OutputProcessor::~OutputProcessor() { stop(); }

std::optional<RequestError> OutputProcessor::submit(GenerateRequest req, OutputCallback on_output) {
  std::vector<Submission> batch;
  batch.push_back({std::move(req), std::move(on_output)});
  return submit(std::move(batch));
}

std::optional<RequestError> OutputProcessor::submit(std::vector<Submission> batch) {
  for (Submission& s : batch) {
    auto stream = std::make_shared<Stream>(tok_, s.req.params, std::move(s.on_output));
    s.on_output = [this, stream](const RequestOutput& o) { post({stream, o, {}}); };
  }
  return engine_.submit(std::move(batch));
}

void OutputProcessor::set_step_observer(std::function<void(const StepStats&)> observer) {
  on_step_ = std::move(observer);
  engine_.set_step_observer([this](const StepStats& s) { post({nullptr, {}, s}); });
}

void OutputProcessor::post(Event e) {
  std::lock_guard lock(mu_);
  queue_.push_back(std::move(e));
  ++num_posted_;
  wake_.notify_one();
}

void OutputProcessor::flush() {
  std::unique_lock lock(mu_);
  const uint64_t target = num_posted_;
  delivered_.wait(lock, [&] { return num_delivered_ >= target || exited_; });
}

void OutputProcessor::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    wake_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

void OutputProcessor::run() {
  for (;;) {
    std::deque<Event> batch;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) {  // stopping, and everything delivered
        exited_ = true;
        delivered_.notify_all();
        return;
      }
      batch.swap(queue_);
    }
    for (Event& e : batch) {
      if (!e.stream) {
        if (on_step_) on_step_(e.step);
      } else if (!e.stream->ended) {
        deliver(*e.stream, e.output);
      }
    }
    std::lock_guard lock(mu_);
    num_delivered_ += batch.size();
    delivered_.notify_all();
  }
}

void OutputProcessor::deliver(Stream& s, RequestOutput& o) {
  for (size_t i = 0; i < o.tokens.size(); ++i) {
    ++s.num_output_tokens;
    OutputText::Delta delta = s.text.push(o.tokens[i].token);
    o.text += delta.text;
    if (!delta.stop) continue;
    // The text ends before the stop string. Tokens after it (the rest of a verified draft) and
    // any the engine is already computing are dropped, and the cancel frees its blocks.
    o.tokens.resize(i + 1);
    engine_.cancel(o.req_id);
    s.ended = true;
    o.finish = FinishReason::Stop;
    o.stop_string = std::move(delta.stop);
    o.error.reset();
    o.num_output_tokens = s.num_output_tokens;
    o.timings.finished = Clock::now();
    break;
  }
  if (o.finish && !s.ended) {
    if (o.finish != FinishReason::Abort) o.text += s.text.flush();
    s.ended = true;
  }
  s.on_output(o);
}

}  // namespace flashserve
