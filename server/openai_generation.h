// One generation request in flight (completions, chat, Responses, Messages): its engine requests
// (one per choice) and the HTTP response its ApiWriter makes of their events, produced on the event loop as engine events arrive (no thread waits on it).
// The status line waits for the first event, so a request the server drops before its first token
// (queue limit, shutdown) still gets its real status rather than a 200 with an error inside.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include "server/http_exchange.h"
#include "server/http_wire.h"
#include "server/api_writer.h"
#include "server/openai_protocol.h"

namespace flashserve {

// The engine requests behind one API request; choice i is engine request i. Destroying it cancels
// those not finished, so however the exchange ends (done, client gone, server stopping) none keeps
// its KV blocks.
class ChoiceStreams {
 public:
  // Submits every choice, or none (throws the refusal as an ApiError).
  ChoiceStreams(Serving& serving, const GenerationRequest& request, const ExchangeInfo& exchange);
  ~ChoiceStreams();
  ChoiceStreams(const ChoiceStreams&) = delete;
  ChoiceStreams& operator=(const ChoiceStreams&) = delete;

  // Every event that has arrived, without waiting.
  std::vector<ChoiceEvent> poll();
  bool done() const { return num_finished_ == streams_.size(); }

 private:
  Serving& serving_;
  std::vector<std::shared_ptr<RequestStream>> streams_;
  std::vector<bool> finished_;
  size_t num_finished_ = 0;
};

// Makes the writer for a request (it may keep a reference: the request outlives it).
using MakeWriter = std::function<std::unique_ptr<ApiWriter>(const GenerationRequest&)>;

class GenerationJob : public DeferredResponse {
 public:
  // Submits the request (throws ApiError when refused: nothing has been sent yet).
  // `headers` go on the answer, whatever it turns out to be (CORS).
  GenerationJob(Serving& serving, GenerationRequest request, const ExchangeInfo& exchange, HeaderList headers,
                const MakeWriter& make_writer);

  std::string advance(bool& done) override;
  std::string abandon() override;

 private:
  std::string head() const;
  std::string error_response(const ApiError& e) const;

  GenerationRequest request_;
  bool closing_;
  HeaderList headers_;
  std::unique_ptr<ApiWriter> writer_;
  ChoiceStreams streams_;
  bool head_sent_ = false;
};

}  // namespace flashserve
