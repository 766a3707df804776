// The bridge between the API front-ends (HTTP, gRPC) and the engine. Front-ends submit tokenized
// requests and read their events from RequestStreams; the engine thread only schedules and runs,
// and everything per event (text, stop strings, metrics, the finish log line, waking a front-end)
// happens on the output thread. Framework-free: no httplib, gRPC or prometheus types here.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "grammar/grammar_cache.h"
#include "model/chat_template.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "scheduler/engine.h"
#include "scheduler/output_processor.h"
#include "server/engine_options.h"
#include "server/reasoning_splitter.h"

namespace flashserve {

// One engine request's events, pushed by the output thread, read by one front-end. A consumer
// either waits in next() or is woken by the `notify` hook (called on the output thread after
// every push: it must be quick and must not call back into the stream) and then calls try_next().
class RequestStream {
 public:
  RequestStream(std::string req_id, std::function<void()> notify)
      : req_id_(std::move(req_id)), notify_(std::move(notify)) {}
  const std::string& req_id() const { return req_id_; }
  void push(const RequestOutput& o);
  // The next event, waiting until `deadline`; nullopt on timeout. After the event with `finish`
  // set, nothing more comes.
  std::optional<RequestOutput> next(Clock::time_point deadline);
  std::optional<RequestOutput> try_next() { return next(Clock::time_point{}); }

 private:
  std::string req_id_;
  std::function<void()> notify_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<RequestOutput> events_;
};

// Observes every request event and engine step, on the output thread (the metrics implement it).
class ServingObserver {
 public:
  virtual ~ServingObserver() = default;
  virtual void on_output(const RequestOutput& o) = 0;
  virtual void on_step(const StepStats& s) = 0;
  // A request refused, by reason: an ErrorKind's name (to_string) or the front door's own
  // ("unauthenticated", "queue_full", "timeout", ...). Any thread.
  virtual void on_rejected(std::string_view /*reason*/) {}
};

struct SubmitResult {
  std::vector<std::shared_ptr<RequestStream>> streams;  // one per choice, when accepted
  std::optional<RequestError> error;                     // when refused (nothing was queued)
};

class Serving {
 public:
  // Starts the engine and output threads. `observer` may be null; it must outlive this object.
  Serving(const Model& model, std::string served_model_name, const EngineOptions& options,
          ServingObserver* observer);
  ~Serving();

  const Model& model() const { return model_; }
  const Tokenizer& tokenizer() const { return model_.tokenizer(); }
  const std::string& model_name() const { return model_name_; }
  int32_t context_len() const { return model_.config().context_len; }
  int32_t kv_block_size() const { return runner_->block_size(); }
  // The longest prompt + output one request may have (see Engine); default max_tokens fills up to it.
  int32_t max_model_len() const { return engine_.max_model_len(); }
  // Most engine requests (prompts x n) one API request may hold: the queue's whole capacity.
  int32_t max_choices() const { return max_waiting_; }
  int32_t max_num_seqs() const { return max_num_seqs_; }  // requests running at once (--max-num-seqs)
  // Text longer than this cannot fit the context window, whatever its tokens: no token covers more
  // bytes than the vocabulary's longest. Checked before tokenizing, so an oversized prompt costs
  // no tokenizer time.
  size_t max_prompt_bytes() const { return max_prompt_bytes_; }
  int32_t max_tokens_default() const { return max_tokens_default_; }  // --max-tokens-default (0: none)
  // OpenAI's system_fingerprint: names this build and model configuration.
  const std::string& system_fingerprint() const { return fingerprint_; }

  // Chat messages -> prompt token ids through the model's template. Throws UnsupportedTemplate or
  // std::invalid_argument (bad roles or order) with a message fit for a 400.
  std::vector<int32_t> chat_prompt(const std::vector<ChatMessage>& messages) const;
  // The same for OpenAI-shaped messages ({role, content} with string content; assistant
  // `tool_calls`, tool `tool_call_id`) and the request's `tools` (null for none). Templates that
  // render tools get them as they are; for the others they become text (model/tool_prompt.h).
  // `template_kwargs`: more variables for the template (chat_template_kwargs, e.g. enable_thinking).
  std::vector<int32_t> chat_prompt(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                   const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object()) const;
  // Reasoning models (--reasoning-parser): the tags their reasoning sits between; nullopt: the
  // output is not split.
  const std::optional<ReasoningTags>& reasoning_tags() const { return reasoning_tags_; }
  // Whether a chat prompt leaves the model inside its reasoning (the template wrote the open tag).
  bool opens_reasoning(const std::vector<int32_t>& prompt) const;
  // The sampler's reasoning budget of `max_tokens` for the tags above (reasoning_tags() must be set).
  ReasoningBudget reasoning_budget(int32_t max_tokens, bool starts_inside) const;
  int32_t reasoning_budget_default() const { return reasoning_budget_default_; }  // -1: none

  // Plain text -> prompt token ids (BOS as the vocabulary asks; special tokens parsed).
  std::vector<int32_t> text_prompt(const std::string& text) const;
  // A constraint's GBNF compiled for this model's vocabulary, from the cache when it was seen
  // before. Thread-safe; throws grammar::GrammarError with a message fit for a 400, and
  // grammar::CompileCancelled (one of them) once `cancelled` returns true.
  std::shared_ptr<const grammar::CompiledGrammar> compile_grammar(const std::string& gbnf,
                                                                  std::function<bool()> cancelled = {}) const {
    return grammars_->get(gbnf, std::move(cancelled));
  }

  // Thread-safe. Queues every choice of one API request (an engine request each, arrival set to
  // when the front-end received it: TTFT counts from there) or none; names each (req_id).
  // `notify` (may be empty) is called on the output thread whenever one of the streams has a new
  // event. A refusal is the front-end's to count.
  SubmitResult submit(std::vector<GenerateRequest> choices, std::function<void()> notify = {});
  // Thread-safe: the request ends with Abort at the next engine step and frees its blocks.
  void cancel(const std::string& req_id);
  // Counts a refusal made outside submit (bad fields, sizes, the front door's own limits).
  void count_rejected(std::string_view reason) const;

  // Shutdown: refuse new requests from now on; wait until in-flight ones finish or `deadline`.
  // Returns true if all finished. abort_in_flight() then ends the rest with an Unavailable error,
  // which their streams carry to the clients as a final event.
  void start_draining() { draining_ = true; }
  bool draining() const { return draining_; }
  bool wait_idle(Clock::time_point deadline);
  void abort_in_flight();

  // Model loaded, not draining, and the engine loop alive (heartbeat within `max_silence`).
  bool ready(Clock::duration max_silence = std::chrono::seconds(5)) const;
  EngineStats stats() const { return engine_.stats(); }
  int32_t num_in_flight() const { return in_flight_; }

 private:
  void on_output(RequestStream& stream, const RequestOutput& o);

  const Model& model_;
  std::string model_name_;
  ServingObserver* observer_;
  std::unique_ptr<ChatTemplate> template_;  // null if the model has none we can apply
  std::string template_error_;
  bool template_renders_tools_ = false;  // Hermes-style: tools and <tool_call> in the template itself
  std::optional<ReasoningTags> reasoning_tags_;
  int32_t reasoning_budget_default_ = -1;
  int32_t max_num_seqs_ = 0;
  std::unique_ptr<ModelRunner> runner_;  // CPU or GPU, per --device
  std::unique_ptr<grammar::GrammarCache> grammars_;
  int32_t max_waiting_;
  Engine engine_;
  size_t max_prompt_bytes_;
  int32_t max_tokens_default_;
  std::string fingerprint_;
  OutputProcessor outputs_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> draining_{false};
  std::atomic<int32_t> in_flight_{0};
  std::mutex idle_mu_;
  std::condition_variable idle_;
};

}  // namespace flashserve
