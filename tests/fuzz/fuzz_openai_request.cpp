// libFuzzer target: the OpenAI request mapping on arbitrary bytes. The first byte picks the
// endpoint (completions, chat, tokenize, detokenize), the rest is the POST body: parse_body, the
// endpoint's parser, then what the server does next with the result (engine_requests and the
// engine's validate for generation, decode for detokenize). An ApiError with a 400 or 404 is the
// answer to a bad body; anything else escaping (a json::exception, std::out_of_range, ...), a crash
// or a sanitizer report is a finding, since the server would answer it with a 500. One Serving over
// a tiny random model is built once; nothing is ever submitted to its engine.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/serving.h"
#include "tests/fuzz/finding.h"
#include "tests/fuzz/request_target.h"
#include "tests/fuzz/tiny_serving.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_openai_request", what, detail);
}

void expect(bool ok, const char* what) {
  if (!ok) finding(what);
}

const Serving& serving() { return fuzz::tiny_serving("fuzz_openai_request"); }

void check_ids(const std::vector<int32_t>& ids) {
  const int32_t vocab_size = serving().tokenizer().vocab_size();
  for (int32_t id : ids) expect(id >= 0 && id < vocab_size, "a token id outside the vocabulary");
}

void generation(const GenerationRequest& r) {
  expect(r.n >= 1 && r.n <= 16, "n outside [1, 16]");
  expect(r.params.logprobs >= -1 && r.params.logprobs <= 20, "logprobs outside [-1, 20]");  // -1: none
  expect(r.logprobs == (r.params.logprobs >= 0), "logprobs asked for but not set, or the reverse");
  expect(!r.prompts.empty(), "no prompt");
  expect(!validate(r.speculative), "a speculative override out of range passed the parser");
  expect(r.endpoint == Endpoint::Completions || r.prompts.size() == 1, "a chat request with several prompts");
  const std::vector<GenerateRequest> choices = engine_requests(r, serving().max_model_len(), serving().max_tokens_default());
  expect(int64_t(choices.size()) == r.num_choices(), "engine_requests does not give one engine request per choice");
  // What Engine::check runs on these parameters at submit; its refusal becomes a 400 too.
  for (const GenerateRequest& g : choices) validate(g.params, serving().tokenizer().vocab_size());
}

void run(uint8_t endpoint, const std::string& body) {
  const Serving& sv = serving();
  switch (endpoint % 4) {
    case 0:
      generation(parse_completion_request(parse_body(body), sv));
      break;
    case 1:
      generation(parse_chat_request(parse_body(body), sv));
      break;
    case 2:
      check_ids(parse_tokenize_request(parse_body(body), sv));
      break;
    case 3: {
      const std::vector<int32_t> ids = parse_detokenize_request(parse_body(body), sv);
      check_ids(ids);
      dump({{"prompt", sv.tokenizer().decode(ids)}});
      break;
    }
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
  fuzz::answer_request("fuzz_openai_request", [&] { run(data[0], body); }, error_body);
  return 0;
}
