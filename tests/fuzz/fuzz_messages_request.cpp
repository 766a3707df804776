// libFuzzer target: Anthropic's Messages request mapping on arbitrary bytes. The first byte picks
// the route (POST /v1/messages or /v1/messages/count_tokens), the rest is the body: parse_body,
// the translation into a chat request and the chat parser behind it, then what the server does
// next (engine_requests and the engine's validate; nothing is submitted). An ApiError with a 400
// or 404 is the answer to a bad body, sent in Anthropic's shape; anything else escaping, a crash
// or a sanitizer report is a finding, since the server would answer it with a 500.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/messages_request.h"
#include "server/messages_writer.h"
#include "server/serving.h"
#include "tests/fuzz/finding.h"
#include "tests/fuzz/request_target.h"
#include "tests/fuzz/tiny_serving.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_messages_request", what, detail);
}

void expect(bool ok, const char* what) {
  if (!ok) finding(what);
}

const Serving& serving() { return fuzz::tiny_serving("fuzz_messages_request"); }

void generation(const MessagesRequest& m) {
  const GenerationRequest& r = m.generation;
  expect(r.endpoint == Endpoint::Chat && r.prompts.size() == 1 && r.n == 1, "not one chat prompt, one choice");
  expect(r.max_tokens.has_value(), "max_tokens missing though required");
  expect(!r.logprobs, "logprobs asked for, though Messages has no such field");
  for (const std::string& s : m.stop_sequences) {
    expect(std::find(r.params.stop.begin(), r.params.stop.end(), s) != r.params.stop.end(),
           "a stop sequence the engine does not stop on");
  }
  const std::vector<GenerateRequest> choices = engine_requests(r, serving().max_model_len(), serving().max_tokens_default());
  expect(choices.size() == 1, "engine_requests does not give one engine request");
  // What Engine::check runs on these parameters at submit; its refusal becomes a 400 too.
  validate(choices[0].params, serving().tokenizer().vocab_size());
}

void run(uint8_t route, const std::string& body) {
  if (route % 2 == 0) {
    generation(parse_messages_request(parse_body(body), serving()));
  } else {
    const int64_t n = count_message_tokens(parse_body(body), serving());
    expect(n > 0, "an empty prompt counted");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  serving();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  fuzz::answer_request("fuzz_messages_request", [&] { run(data[0], body); }, anthropic_error_body);
  return 0;
}
