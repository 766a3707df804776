#include "server/openai_generation.h"

namespace flashserve {

ChoiceStreams::ChoiceStreams(Serving& serving, const GenerationRequest& request, Clock::time_point arrival)
    : serving_(serving) {
  for (int32_t c = 0; c < request.num_choices(); ++c) {
    SubmitResult r = serving.submit(request.prompts[size_t(c / request.n)], params_for(request, c, serving.max_model_len()),
                                    arrival, request.priority);
    if (!r.stream) {
      cancel_unfinished();
      throw submit_error(r);
    }
    streams_.push_back(std::move(r.stream));
    finished_.push_back(false);
  }
}

ChoiceStreams::~ChoiceStreams() { cancel_unfinished(); }

void ChoiceStreams::cancel_unfinished() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!finished_[i]) serving_.cancel(streams_[i]->req_id());
  }
}

void ChoiceStreams::take(size_t choice, RequestOutput o, std::vector<ChoiceEvent>& events) {
  if (o.finish) {
    finished_[choice] = true;
    ++num_finished_;
  }
  events.push_back({int32_t(choice), std::move(o)});
}

// The choices of one request usually advance in the same engine step, so waiting on the first
// unfinished one and then draining the rest without waiting delays nobody by more than a slice.
std::vector<ChoiceEvent> ChoiceStreams::poll(Clock::time_point deadline) {
  std::vector<ChoiceEvent> events;
  size_t first = 0;
  while (first < streams_.size() && finished_[first]) ++first;
  if (first == streams_.size()) return events;
  auto o = streams_[first]->next(deadline);
  if (!o) return events;
  take(first, std::move(*o), events);
  for (size_t i = first; i < streams_.size(); ++i) {
    while (!finished_[i]) {
      auto more = streams_[i]->next(Clock::time_point{});
      if (!more) break;
      take(i, std::move(*more), events);
    }
  }
  return events;
}

GenerationJob::GenerationJob(Serving& serving, GenerationRequest request, Clock::time_point arrival)
    : request_(std::move(request)),
      builder_(request_, serving.tokenizer(), serving.model_name()),
      streams_(serving, request_, arrival) {}

std::string GenerationJob::advance(Clock::duration wait, bool& last) {
  std::string out;
  if (!started_) {
    started_ = true;
    out = builder_.start();
  }
  out += builder_.add(streams_.poll(Clock::now() + wait));
  last = streams_.done() || builder_.failed();
  if (last) out += builder_.finish();
  return out;
}

}  // namespace flashserve
