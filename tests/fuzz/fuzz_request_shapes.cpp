// libFuzzer target, structure-aware: the input is a recipe for a request, not its bytes. It picks a
// route -- the four OpenAI routes or gRPC Generate -- and a field (every field each route reads,
// and the places inside messages, tools and schemas a value is walked further), and fills it with
// what an attacker sends: nesting up to 300k deep, arrays of up to 100k elements, strings up to
// 1 MiB, extreme numbers, long repetitions in regexes and grammars. Then it runs what the server
// runs before the engine: parse_body and the route's parser, or engine_request for gRPC, then
// the engine's validate. A clean refusal (a 400/404/503 ApiError, a gRPC INVALID_ARGUMENT,
// OUT_OF_RANGE or UNAVAILABLE) is the expected answer; a crash, a sanitizer report, any other
// exception or status, or a hang (libFuzzer's -timeout) is a finding. The grammar compile runs
// within its budget, so a pathological constraint must be refused within the timeout too.
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "server/grpc_generation.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/serving.h"
#include "tests/fuzz/finding.h"
#include "tests/fuzz/tiny_serving.h"
#include "tests/util/request_holes.h"

namespace {

using namespace flashserve;
namespace pb = ::flashserve::v1;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_request_shapes", what, detail);
}

const Serving& serving() { return fuzz::tiny_serving("fuzz_request_shapes"); }

// Reads the recipe: bytes, then zeros once it runs out.
class Recipe {
 public:
  Recipe(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  // In [0, max], from three bytes; sizes come out spread over the whole range.
  uint32_t below(uint32_t max) {
    const uint32_t v = uint32_t(byte()) | uint32_t(byte()) << 8 | uint32_t(byte()) << 16;
    return v % (max + 1);
  }
  std::string rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_ - std::min(pos_, size_));
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_, pos_ = 0;
};

std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A JSON value of one of the shapes an attacker sends.
std::string shape(Recipe& r) {
  static const char* const kNumbers[] = {"1e308", "-1e308", "4.9e-324", "9223372036854775807", "18446744073709551616",
                                         "-9223372036854775809", "-0.0", "1.5", "0", "2147483648", "-1", "1e999"};
  static const char* const kLiterals[] = {"true", "false", "null", "\"\"", "{}", "[]", "\"text\"", "[1]", "{\"a\":1}"};
  std::string out;
  switch (r.byte() % 10) {
    case 0: {
      const uint32_t depth = r.below(300'000);
      out.assign(depth, '[');
      out += "1";
      out.append(depth, ']');
      break;
    }
    case 1: {
      const uint32_t depth = r.below(100'000);
      for (uint32_t i = 0; i < depth; ++i) out += "{\"a\":";
      out += "1";
      out.append(depth, '}');
      break;
    }
    case 2: {
      const uint32_t n = r.below(100'000);
      const int32_t base = int32_t(r.below(0xFFFFFF)) - 0x7FFFFF;
      out = "[";
      for (uint32_t i = 0; i < n; ++i) out += (i ? "," : "") + std::to_string(base + int32_t(i));
      out += "]";
      break;
    }
    case 3: {
      const uint32_t n = r.below(20'000);
      out = "[";
      for (uint32_t i = 0; i < n; ++i) out += i ? ",\"s\"" : "\"s\"";
      out += "]";
      break;
    }
    case 4: {
      const char fill = "a\"\\\n<{[ "[r.byte() % 8];
      out = json_string(std::string(r.below(1 << 20), fill));
      break;
    }
    case 5: out = kNumbers[r.byte() % std::size(kNumbers)]; break;
    case 6: out = kLiterals[r.byte() % std::size(kLiterals)]; break;
    case 7: {
      const uint32_t n = r.below(50'000);
      out = "{";
      for (uint32_t i = 0; i < n; ++i) out += (i ? ",\"" : "\"") + std::to_string(i) + "\":" + std::to_string(i % 7);
      out += "}";
      break;
    }
    case 8: out = json_string(r.rest()); break;
    default: out = r.rest(); break;  // raw: a value that may not be JSON at all
  }
  return out;
}

// A regex or GBNF text built to be expensive: a repetition of a class, nested quantifiers.
std::string costly_pattern(Recipe& r, bool gbnf) {
  static const char* const kAtoms[] = {"[\\s\\S]", "[^\"]", "(a|aa)", "(x+x+)+", "(.*a)", ".", "[a-z]"};
  std::string atom = kAtoms[r.byte() % std::size(kAtoms)];
  if (gbnf && atom.find('\\') != std::string::npos) atom = "[^a]";
  const std::string body = atom + "{" + std::to_string(r.below(12'000)) + "}" + (r.byte() % 2 ? "b" : "");
  return gbnf ? "root ::= " + body : body;
}

void check_params(const SamplingParams& p) {
  validate(p, serving().tokenizer().vocab_size());  // what Engine::submit runs; its refusal is a 400
}

void openai(Recipe& r) {
  static const std::vector<test::RouteHoles> routes = test::route_holes();
  const size_t endpoint = r.byte() % routes.size();  // completions, chat, tokenize, detokenize
  const test::RouteHoles& route = routes[endpoint];
  const std::string& request = route.requests[r.below(uint32_t(route.requests.size()) - 1)];
  const uint8_t kind = r.byte();
  const std::string body =
      test::fill_hole(request, kind % 8 == 7 ? json_string(costly_pattern(r, kind % 16 == 15)) : shape(r));
  const Serving& sv = serving();
  try {
    switch (endpoint) {
      case 0:
      case 1: {
        const json parsed = parse_body(body);
        const GenerationRequest g =
            endpoint == 0 ? parse_completion_request(parsed, sv) : parse_chat_request(parsed, sv);
        for (const GenerateRequest& c : engine_requests(g, sv.max_model_len(), sv.max_tokens_default())) check_params(c.params);
        break;
      }
      case 2: parse_tokenize_request(parse_body(body), sv); break;
      case 3: sv.tokenizer().decode(parse_detokenize_request(parse_body(body), sv)); break;
    }
  } catch (const ApiError& e) {
    if (e.status != 400 && e.status != 404 && e.status != 503) {
      finding("an ApiError that is not a 400, 404 or 503", e.what());
    }
    dump(error_body(e));
  } catch (const std::exception& e) {
    finding("an exception other than ApiError escaped", e.what());
  }
}

void grpc_generate(Recipe& r) {
  pb::GenerateRequest req;
  switch (r.byte() % 3) {
    case 0: req.set_text(std::string(r.below(1 << 20), char('a' + r.byte() % 26))); break;
    case 1:
      for (uint32_t i = 0, n = r.below(100'000); i < n; ++i) req.mutable_token_ids()->add_ids(int32_t(i % 300) - 10);
      break;
    default:
      for (uint32_t i = 0, n = r.below(5'000); i < n; ++i) {
        pb::ChatMessage* m = req.mutable_messages()->add_messages();
        m->set_role(i % 2 ? "assistant" : "user");
        m->set_content(std::string(r.below(2'000), 'x'));
      }
  }
  pb::SamplingParams& s = *req.mutable_sampling();
  for (uint32_t i = 0, n = r.below(20'000); i < n; ++i) {
    (*s.mutable_logit_bias())[int32_t(i) - 3] = float(i % 250) - 125;
  }
  if (r.byte() % 2) s.set_temperature(r.byte() % 2 ? std::numeric_limits<float>::quiet_NaN() : 1e30f);
  if (r.byte() % 2) s.set_logprobs(int32_t(r.below(100)) - 2);
  pb::StoppingParams& st = *req.mutable_stopping();
  for (uint32_t i = 0, n = r.below(20'000); i < n; ++i) st.add_stop_token_ids(int32_t(i % 400) - 5);
  for (uint32_t i = 0, n = r.below(8); i < n; ++i) st.add_stop(std::string(r.below(600), 's'));
  st.set_max_tokens(int32_t(r.below(0xFFFFFF)) - 1000);
  switch (r.byte() % 5) {
    case 0: req.mutable_constraint()->set_json_schema(shape(r)); break;
    case 1: req.mutable_constraint()->set_json_schema("{\"anyOf\": [" + shape(r) + "]}"); break;
    case 2: req.mutable_constraint()->set_regex(costly_pattern(r, false)); break;
    case 3: req.mutable_constraint()->set_grammar(costly_pattern(r, true)); break;
    default: break;
  }
  GenerateRequest out;
  const grpc::Status status = grpc_api::engine_request(serving(), req, {}, out);
  if (status.ok()) {
    check_params(out.params);
    return;
  }
  const grpc::StatusCode c = status.error_code();
  using grpc::StatusCode;
  if (c != StatusCode::INVALID_ARGUMENT && c != StatusCode::OUT_OF_RANGE && c != StatusCode::UNAVAILABLE) {
    finding("a gRPC status other than INVALID_ARGUMENT, OUT_OF_RANGE or UNAVAILABLE", status.error_message());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  serving();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Recipe r(data, size);
  try {
    if (r.byte() % 5 == 4) {
      grpc_generate(r);
    } else {
      openai(r);
    }
  } catch (const std::exception& e) {
    finding("an exception escaped", e.what());
  }
  return 0;
}
