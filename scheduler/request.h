// One generation request as the scheduler tracks it. There are no prefill and decode phases:
// num_computed_tokens catches up with the token count (prompt + output), whether by prompt chunks,
// prefix-cache hits, one decode token a step, or a recompute after preemption.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "scheduler/kv_cache_manager.h"
#include "scheduler/pooling.h"
#include "scheduler/sampler.h"
#include "scheduler/sampling_params.h"
#include "scheduler/speculation.h"

namespace flashserve {

using Clock = std::chrono::steady_clock;

// "stop": EOS, a stop token or a stop string; "length": max_tokens or the context window;
// "abort": cancelled (client gone, deadline, shutdown) or failed (see RequestError).
enum class FinishReason { Stop, Length, Abort };
std::string_view to_string(FinishReason r);

// Why the server refused a request, or ended it without an answer. Front-ends map the kind to a
// status (400, 429, 503, 500 / INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...).
enum class ErrorKind {
  Invalid,      // bad parameters
  TooLong,      // cannot fit the context window or the KV cache, even alone
  Overloaded,   // the queue is full, or it waited longer than the server lets requests queue
  Deadline,     // the client's own deadline passed before it could finish
  Unavailable,  // the server is shutting down
  Internal,     // our bug: the model refused the batch
};
std::string_view to_string(ErrorKind k);
struct RequestError {
  ErrorKind kind;
  std::string message;
};

struct RequestTimings {
  Clock::time_point arrival;          // when the server received it (before tokenization)
  Clock::time_point first_scheduled;  // first step that ran any of it
  Clock::time_point first_token;
  Clock::time_point last_token;
  Clock::time_point finished;
};

// One engine request as every front door builds it (an OpenAI choice, a gRPC call, the CLI's
// prompt) and the engine queues it: the one request type from the API to the scheduler.
struct GenerateRequest {
  std::string req_id;  // unique among live requests (Serving names them)
  std::vector<int32_t> prompt_ids;
  SamplingParams params;
  int32_t priority = 0;  // lower is served first (with priority scheduling)
  Clock::time_point arrival = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();  // the client's; dropped once it passes
  // An embedding: the prompt is computed and pooled this way, nothing is generated.
  std::optional<Pooling> pooling{};
  SpeculativeOverride speculative{};  // the server's speculative decoding, or this request's own
};

// One request's progress in one step; the last one has `finish` set. The engine reports tokens;
// `text` is filled by the OutputProcessor, off the engine thread.
struct RequestOutput {
  std::string req_id;
  std::vector<SampledToken> tokens;  // new this step (with speculative decoding, several)
  std::string text;                  // new text (UTF-8 complete, stop strings withheld)
  std::optional<FinishReason> finish;
  std::optional<std::string> stop_string;  // with finish Stop: the stop string that ended it (none: EOS, a stop token)
  std::optional<RequestError> error; // with Abort, when the server (not the client) ended it
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;
  int32_t num_cached_tokens = 0;     // prompt tokens served from the prefix cache
  int32_t num_preemptions = 0;
  RequestTimings timings;
  std::vector<float> embedding;      // an embedding request's, with its finish (Stop)
};
// Runs on the engine thread: must return quickly and never call back into the engine.
using OutputCallback = std::function<void(const RequestOutput&)>;

// The scheduler's state of one GenerateRequest.
struct Request {
  // `fallback_seed` seeds its sampler when the parameters carry no seed.
  Request(GenerateRequest g, uint64_t fallback_seed);

  std::string req_id;
  int64_t arrival_order = 0;       // set by the scheduler; ties in priority go FCFS
  int32_t priority = 0;            // lower is served first
  std::vector<int32_t> token_ids;  // prompt then output
  int32_t num_prompt_tokens;
  int32_t num_computed_tokens = 0; // tokens whose KV is in the cache
  int32_t num_cached_tokens = 0;   // prompt tokens found in the prefix cache at first admission
  SamplingParams params;
  RequestSampler sampler;
  KvSequence kv;
  int32_t num_preemptions = 0;
  bool scheduled_before = false;
  // Past this it is dropped, queued or running (the client's deadline).
  Clock::time_point deadline = Clock::time_point::max();
  // Past this it is dropped if it has not started (the server's longest queue time).
  Clock::time_point start_deadline = Clock::time_point::max();
  std::optional<FinishReason> finish;
  std::optional<RequestError> error;  // with finish Abort, when the server (not the client) ended it
  RequestTimings timings;
  OutputCallback on_output;  // the engine's: where its progress goes, until its finish is told
  std::optional<PooledState> pooled;  // an embedding request's
  SpeculativeOverride speculative;    // as asked for; the scheduler starts `drafting` from it
  DraftState drafting;

  int32_t num_tokens() const { return int32_t(token_ids.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // Whether the next step that reaches the end of its tokens samples one (embeddings never do).
  bool generates() const { return !pooled; }
};

}  // namespace flashserve
