// libFuzzer target: the Responses API request (POST /v1/responses body) on arbitrary bytes:
// parse_body, parse_responses_request (input items, tools, text.format, previous_response_id
// against a store holding "resp_seed"), then what the server does next: the engine requests and
// their validation, and a writer answering with one token (streamed or not). An ApiError with a
// 400 or 404 is the answer to a bad body; anything else escaping, a crash or a sanitizer report is
// a finding. Nothing is submitted to the engine.
#include <cstdint>
#include <string>
#include <string_view>

#include "server/responses_request.h"
#include "server/responses_writer.h"
#include "tests/fuzz/finding.h"
#include "tests/fuzz/request_target.h"
#include "tests/fuzz/tiny_serving.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_responses_request", what, detail);
}

const Serving& serving() { return fuzz::tiny_serving("fuzz_responses_request"); }

ResponseStore& store() {
  static ResponseStore* s = [] {
    auto* store = new ResponseStore(4, 1 << 20);
    store->put("resp_seed", {json::parse(R"([{"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
         "function": {"name": "reset", "arguments": "{}"}}]}])"), json::object()});
    return store;
  }();
  return *s;
}

void run(const std::string& body) {
  ResponsesRequest r = parse_responses_request(parse_body(body), serving(), store());
  const GenerationRequest& g = r.generation;
  if (g.num_choices() != 1) finding("a Responses request with other than one choice");
  for (const GenerateRequest& e : engine_requests(g, serving().max_model_len(), serving().max_tokens_default())) {
    validate(e.params, serving().tokenizer().vocab_size());
  }
  // A store of its own: the one above keeps its seed.
  ResponseStore answers(2, 1 << 16);
  ResponsesWriter w(g, std::move(r.echo), std::move(r.conversation), r.store ? &answers : nullptr);
  RequestOutput o;
  o.text = "<tool_call>\n{\"name\": \"reset\", \"arguments\": {}}\n</tool_call>";
  o.num_output_tokens = 1;
  o.finish = FinishReason::Stop;
  w.add({{0, o}});
  w.finish();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  serving();
  store();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  fuzz::answer_request("fuzz_responses_request", [&] { run(body); }, error_body);
  return 0;
}
