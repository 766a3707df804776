// The engine reports token ids; everything else a request's consumer needs happens here, on one
// output thread: detokenizing (cut at UTF-8 boundaries), stop strings (a match ends the request
// for its consumer and cancels it in the engine), and the consumers' own callbacks (metrics, logs,
// waking a front-end). The engine thread only queues events, so a slow consumer, a full log pipe
// or an expensive stop-string match never holds up a step.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>
#include "scheduler/engine.h"
#include "scheduler/output_text.h"

namespace flashserve {

class OutputProcessor {
 public:
  // Starts the output thread. The engine must outlive this object and be stopped before stop().
  OutputProcessor(Engine& engine, const Tokenizer& tok);
  ~OutputProcessor();
  OutputProcessor(const OutputProcessor&) = delete;
  OutputProcessor& operator=(const OutputProcessor&) = delete;

  // Engine::submit, with each request's callback called on the output thread, `text` filled in.
  std::optional<RequestError> submit(std::vector<Submission> batch);
  std::optional<RequestError> submit(GenerateRequest req, OutputCallback on_output);
  void cancel(const std::string& req_id) { engine_.cancel(req_id); }
  // Step statistics, delivered on the output thread. Set before the engine starts.
  void set_step_observer(std::function<void(const StepStats&)> observer);

  // Returns once everything queued before the call has been delivered (for callers that step
  // the engine on their own thread and then read the results).
  void flush();
  // Delivers what is queued, then ends the thread. Idempotent.
  void stop();

 private:
  // One request as its consumer sees it. Touched only by the output thread once submitted.
  struct Stream {
    Stream(const Tokenizer& tok, const SamplingParams& p, OutputCallback cb)
        : text(tok, p.stop), on_output(std::move(cb)) {}
    OutputText text;
    OutputCallback on_output;
    int32_t num_output_tokens = 0;
    bool ended = false;  // a stop string ended it; the engine's later events are dropped
  };
  struct Event {
    std::shared_ptr<Stream> stream;  // null for a step report
    RequestOutput output;
    StepStats step;
  };

  void post(Event e);
  void run();
  void deliver(Stream& s, RequestOutput& o);

  Engine& engine_;
  const Tokenizer& tok_;
  std::function<void(const StepStats&)> on_step_;

  std::mutex mu_;
  std::condition_variable wake_, delivered_;
  std::deque<Event> queue_;
  uint64_t num_posted_ = 0, num_delivered_ = 0;
  bool stopping_ = false;
  bool exited_ = false;
  std::thread thread_;
};

}  // namespace flashserve
