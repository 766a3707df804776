// One completions / chat request in flight: its engine requests (one per choice) and the response
// they make. The HTTP layer calls advance() in short slices so that, between slices, it can check
// whether the client is still there; dropping the job cancels whatever is still running.
#pragma once
#include <memory>
#include <string>
#include <vector>
#include "server/openai_response.h"

namespace flashserve {

// The engine requests behind one API request; choice i is engine request i. Destroying it cancels
// those not finished, so however the exchange ends (done, client gone, server stopping) none keeps
// its KV blocks.
class ChoiceStreams {
 public:
  // Submits every choice; if one is refused, cancels those already in and throws its ApiError.
  ChoiceStreams(Serving& serving, const GenerationRequest& request, Clock::time_point arrival);
  ~ChoiceStreams();
  ChoiceStreams(const ChoiceStreams&) = delete;
  ChoiceStreams& operator=(const ChoiceStreams&) = delete;

  // Events that arrived by `deadline`: waits for one, then takes whatever the others have.
  std::vector<ChoiceEvent> poll(Clock::time_point deadline);
  bool done() const { return num_finished_ == streams_.size(); }

 private:
  void cancel_unfinished();
  void take(size_t choice, RequestOutput o, std::vector<ChoiceEvent>& events);

  Serving& serving_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<bool> finished_;
  size_t num_finished_ = 0;
};

class GenerationJob {
 public:
  // Submits the request (throws ApiError when refused: nothing has been sent yet).
  GenerationJob(Serving& serving, GenerationRequest request, Clock::time_point arrival);

  const char* content_type() const { return request_.stream ? "text/event-stream" : "application/json"; }
  // Waits up to `wait` for engine events; returns the bytes to send now (possibly none). `last` is
  // set when these are the final bytes of the response.
  std::string advance(Clock::duration wait, bool& last);

 private:
  GenerationRequest request_;
  ResponseBuilder builder_;
  ChoiceStreams streams_;
  bool started_ = false;
};

}  // namespace flashserve
