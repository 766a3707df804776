// libFuzzer target: the embeddings request (POST /v1/embeddings body) on arbitrary bytes:
// parse_body, parse_embeddings_request, then what the server does next: the engine requests and
// their validation, and the writer's answer for made-up embeddings, float and base64. An ApiError
// with a 400 or 404 is the answer to a bad body; anything else escaping, a crash or a sanitizer
// report is a finding. Nothing is submitted to the engine.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/embeddings.h"
#include "tests/fuzz/finding.h"
#include "tests/fuzz/request_target.h"
#include "tests/fuzz/tiny_serving.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_embeddings_request", what, detail);
}

const Serving& serving() { return fuzz::tiny_serving("fuzz_embeddings_request"); }

void run(const std::string& body) {
  const EmbeddingsRequest r = parse_embeddings_request(parse_body(body), serving());
  const GenerationRequest& g = r.generation;
  if (g.prompts.empty() || !g.pooling) finding("an embeddings request with no input or no pooling");
  for (const GenerateRequest& e : engine_requests(g, serving().max_model_len(), serving().max_tokens_default())) {
    if (e.prompt_ids.empty()) finding("an empty input got through");
    validate(e.params, serving().tokenizer().vocab_size());
  }
  EmbeddingsWriter w(g, r.base64, "test-model");
  std::vector<ChoiceEvent> events;
  for (int32_t i = 0; i < g.num_choices(); ++i) {
    RequestOutput o;
    o.finish = FinishReason::Stop;
    o.embedding = {0.5f, -0.25f, float(i)};
    events.push_back({i, std::move(o)});
  }
  w.add(events);
  w.finish();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  serving();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  fuzz::answer_request("fuzz_embeddings_request", [&] { run(body); }, error_body);
  return 0;
}
