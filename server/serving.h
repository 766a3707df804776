// The bridge between the API front-ends (HTTP, gRPC) and the engine. Front-end threads submit a
// tokenized request and read its events from a RequestStream; only the engine thread touches engine
// state. Framework-free: no httplib, gRPC or prometheus types here.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>
#include "model/chat_template.h"
#include "model/llama_model.h"
#include "model/model_runner.h"
#include "scheduler/engine.h"
#include "server/engine_options.h"

namespace flashserve {

// One request's events, pushed by the engine thread, drained by one front-end thread.
class RequestStream {
 public:
  explicit RequestStream(std::string req_id) : req_id_(std::move(req_id)) {}
  const std::string& req_id() const { return req_id_; }
  void push(const RequestOutput& o);
  // The next event, waiting until `deadline`; nullopt on timeout. After the event with `finish`
  // set, nothing more comes.
  std::optional<RequestOutput> next(Clock::time_point deadline);

 private:
  std::string req_id_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<RequestOutput> events_;
};

// Observes every request event and engine step, on the engine thread (the metrics implement it).
class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  virtual void on_output(const RequestOutput& o) = 0;
  virtual void on_step(const StepStats& s) = 0;
};

struct SubmitResult {
  std::shared_ptr<RequestStream> stream;  // set when accepted
  std::optional<Rejection> rejection;     // set when refused
  bool draining = false;                  // refused because the server is shutting down
};

class Serving {
 public:
  // Starts the engine thread. `observer` may be null; it must outlive this object.
  Serving(const LlamaModel& model, std::string served_model_name, const EngineOptions& options,
          ServingObserver* observer);
  ~Serving();

  const LlamaModel& model() const { return model_; }
  const Tokenizer& tokenizer() const { return model_.tokenizer(); }
  const std::string& model_name() const { return model_name_; }
  int32_t context_len() const { return model_.config().context_len; }
  int32_t kv_block_size() const { return runner_->block_size(); }
  // The longest prompt + output one request may have (see Engine); default max_tokens fills up to it.
  int32_t max_model_len() const { return engine_.max_model_len(); }

  // Chat messages -> prompt token ids through the model's template. Throws UnsupportedTemplate or
  // std::invalid_argument (bad roles or order) with a message fit for a 400.
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages) const;
  // Plain text -> prompt token ids (BOS as the vocabulary asks; special tokens parsed).
  std::vector<int32_t> text_prompt(const std::string& text) const;

  // Thread-safe. `arrival` is when the front-end received the request (TTFT counts from there).
  SubmitResult submit(std::vector<int32_t> prompt_ids, SamplingParams params, Clock::time_point arrival,
                      int32_t priority = 0);
  // Thread-safe: the request ends with Abort at the next engine step and frees its blocks.
  void cancel(const std::string& req_id);

  // Shutdown: refuse new requests from now on; wait until in-flight ones finish or `deadline`.
  // Returns true if all finished.
  void start_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  bool wait_idle(Clock::time_point deadline);

  // Model loaded, not draining, and the engine loop alive (heartbeat within `max_silence`).
  bool ready(Clock::duration max_silence = std::chrono::seconds(5)) const;
  EngineStats stats() const { return engine_.stats(); }
  int32_t num_in_flight() const { return in_flight_; }

 private:
  const LlamaModel& model_;
  std::string model_name_;
  ServingObserver* observer_;
  std::unique_ptr<ChatTemplate> template_;  // null if the model has none we can apply
  std::string template_error_;
  std::unique_ptr<ModelRunner> runner_;  // CPU or GPU, per --device
  Engine engine_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> draining_{false};
  std::atomic<int32_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_;
};

}  // namespace flashserve
