#include "server/openai_generation.h"

#include "server/http_wire.h"

namespace flashserve {

ChoiceStreams::ChoiceStreams(Serving& serving, const GenerationRequest& request, const ExchangeInfo& exchange)
    : serving_(serving) {
  std::vector<GenerateRequest> choices = engine_requests(request, serving.max_model_len(), serving.max_tokens_default());
  for (GenerateRequest& g : choices) g.arrival = exchange.arrival;
  SubmitResult submitted = serving.submit(std::move(choices), exchange.wake);
  if (submitted.error) throw api_error(*submitted.error);
  streams_ = std::move(submitted.streams);
  finished_.assign(streams_.size(), false);
}

ChoiceStreams::~ChoiceStreams() {
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!finished_[i]) serving_.cancel(streams_[i]->req_id());
  }
}

std::vector<ChoiceEvent> ChoiceStreams::poll() {
  std::vector<ChoiceEvent> events;
  for (size_t i = 0; i < streams_.size(); ++i) {
    while (!finished_[i]) {
      std::optional<RequestOutput> o = streams_[i]->try_next();
      if (!o) break;
      if (o->finish) {
        finished_[i] = true;
        ++num_finished_;
      }
      events.push_back({int32_t(i), std::move(*o)});
    }
  }
  return events;
}

GenerationJob::GenerationJob(Serving& serving, GenerationRequest request, const ExchangeInfo& exchange,
                             HeaderList headers, const MakeWriter& make_writer)
    : request_(std::move(request)),
      closing_(exchange.closing),
      headers_(std::move(headers)),
      writer_(make_writer(request_)),
      streams_(serving, request_, exchange) {}

std::string GenerationJob::head() const {
  HeaderList headers = headers_;
  headers.emplace_back("Cache-Control", "no-cache");
  return http_chunked_head(200, "text/event-stream", headers, closing_);
}

std::string GenerationJob::error_response(const ApiError& e) const {
  HeaderList headers = headers_;
  if (e.retry_after_s > 0) headers.emplace_back("Retry-After", std::to_string(e.retry_after_s));
  return http_response(e.status, "application/json", dump(writer_->error_json(e)), headers, closing_);
}

std::string GenerationJob::advance(bool& done) {
  const std::vector<ChoiceEvent> events = streams_.poll();
  if (events.empty()) return "";
  const std::string sse = writer_->add(events);
  const bool over = streams_.done() || writer_->failure();
  if (!request_.stream) {
    if (!over) return "";
    done = true;
    if (writer_->failure()) return error_response(api_error(*writer_->failure()));
    return http_response(200, "application/json", writer_->finish(), headers_, closing_);
  }
  std::string out;
  if (!head_sent_) {
    // Failed before a single token: the status can still say so.
    if (writer_->failure() && !writer_->produced_tokens()) {
      done = true;
      return error_response(api_error(*writer_->failure()));
    }
    head_sent_ = true;
    out = head();
  }
  out += http_chunk(sse);
  if (over) {
    done = true;
    out += http_chunk(writer_->finish());
    out += http_last_chunk();
  }
  return out;
}

std::string GenerationJob::abandon() {
  const RequestError stopping{ErrorKind::Unavailable, "the server is shutting down"};
  if (!head_sent_) return error_response(api_error(stopping));
  return http_chunk(writer_->fail_unfinished(stopping)) + http_chunk(writer_->finish()) + std::string(http_last_chunk());
}

}  // namespace flashserve
