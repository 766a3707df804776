// libFuzzer target, structure-aware: the input is a recipe for a request, not its bytes. It picks a
// route -- the four OpenAI routes or gRPC Generate -- and a field (every field each route reads,
// and the places inside messages, tools and schemas a value is walked further), and fills it with
// what an attacker sends: nesting up to 300k deep, arrays of up to 100k elements, strings up to
// 1 MiB, extreme numbers, long repetitions in regexes and grammars. Then it runs what the server
// runs before the engine: parse_body and the route's parser, or serving_request for gRPC, then
// the engine's validate. A clean refusal (a 400/404/503 ApiError, a gRPC INVALID_ARGUMENT,
// OUT_OF_RANGE or UNAVAILABLE) is the expected answer; a crash, a sanitizer report, any other
// exception or status, or a hang (libFuzzer's -timeout) is a finding. The grammar compile runs
// within its budget, so a pathological constraint must be refused within the timeout too.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "server/grpc_generation.h"
#include "server/openai_protocol.h"
#include "server/openai_response.h"
#include "server/serving.h"
#include "tests/fuzz/finding.h"
#include "tests/util/tiny_model.h"

namespace {

using namespace flashserve;
namespace pb = ::flashserve::v1;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_request_shapes", what, detail);
}

const Serving& serving() {
  static const Serving* s = [] {
    const std::string path = test::temp_model_path("fuzz_request_shapes");
    test::write_tiny_model(path, {});
    auto* model = LlamaModel::load(path).release();
    std::filesystem::remove(path);
    EngineOptions options;
    options.kv_cache_bytes = 1 << 20;
    options.device = "cpu";
    return new Serving(*model, "test-model", options, nullptr);
  }();
  return *s;
}

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

struct Route {
  int endpoint;                        // 0 completions, 1 chat, 2 tokenize, 3 detokenize
  std::vector<std::string> requests;   // each with kHole where the shape goes
};

const std::string kHole = "\"@HOLE@\"";

const std::vector<Route>& routes() {
  static const std::vector<Route> r = [] {
    auto fields = [](const std::string& base, std::vector<const char*> names) {
      std::vector<std::string> out;
      for (const char* f : names) out.push_back("{" + base + ", \"" + f + "\": " + kHole + "}");
      return out;
    };
    const std::vector<const char*> common = {
        "model", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "stop", "presence_penalty",
        "frequency_penalty", "logit_bias", "seed", "user", "top_k", "min_p", "repetition_penalty", "ignore_eos",
        "stop_token_ids", "priority", "max_completion_tokens", "response_format", "grammar", "regex", "unknown"};
    std::vector<const char*> completion = common, chat = common;
    for (const char* f : {"logprobs", "echo", "suffix", "best_of"}) completion.push_back(f);
    for (const char* f : {"logprobs", "top_logprobs", "tools", "tool_choice", "parallel_tool_calls", "functions",
                          "function_call", "store", "metadata", "service_tier", "modalities", "audio", "prediction",
                          "reasoning_effort", "web_search_options"}) {
      chat.push_back(f);
    }
    Route completions{0, fields("\"prompt\": \"hi\", \"max_tokens\": 2", completion)};
    completions.requests.push_back("{\"prompt\": " + kHole + "}");
    completions.requests.push_back("{\"prompt\": [" + kHole + "]}");
    const std::string msg = "\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"max_tokens\": 2";
    Route chats{1, fields(msg, chat)};
    for (const std::string& m : {
             "{\"role\": \"user\", \"content\": " + kHole + "}",
             "{\"role\": \"user\", \"content\": [" + kHole + "]}",
             "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": " + kHole + "}]}",
             "{\"role\": " + kHole + ", \"content\": \"hi\"}",
             "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": " + kHole + "}",
             "{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"1\", \"type\": \"function\", \"function\": "
             "{\"name\": \"f\", \"arguments\": " + kHole + "}}]}",
             "{\"role\": \"tool\", \"tool_call_id\": " + kHole + ", \"content\": \"x\"}",
         }) {
      chats.requests.push_back("{\"messages\": [" + m + "], \"max_tokens\": 2}");
    }
    chats.requests.push_back("{\"messages\": " + kHole + "}");
    chats.requests.push_back("{" + msg + ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", "
                             "\"parameters\": " + kHole + "}}], \"tool_choice\": \"required\"}");
    chats.requests.push_back("{" + msg + ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                             "{\"name\": \"x\", \"schema\": " + kHole + "}}}");
    chats.requests.push_back("{" + msg + ", \"response_format\": {\"type\": \"json_schema\", \"json_schema\": "
                             "{\"name\": \"x\", \"schema\": {\"type\": \"object\", \"properties\": {\"a\": " + kHole +
                             "}}}}}");
    Route tokenize{2, {"{\"prompt\": " + kHole + "}", "{\"messages\": " + kHole + "}",
                       "{\"prompt\": \"hi\", \"add_special_tokens\": " + kHole + "}"}};
    Route detokenize{3, {"{\"tokens\": " + kHole + "}", "{\"tokens\": [1], \"model\": " + kHole + "}"}};
    return std::vector<Route>{completions, chats, tokenize, detokenize};
  }();
  return r;
}

void check_params(const SamplingParams& p) {
  validate(p, serving().tokenizer().vocab_size());  // what Engine::submit runs; its refusal is a 400
}

void openai(Recipe& r) {
  const Route& route = routes()[r.byte() % routes().size()];
  std::string body = route.requests[r.below(uint32_t(route.requests.size()) - 1)];
  const uint8_t kind = r.byte();
  const std::string value = kind % 8 == 7 ? json_string(costly_pattern(r, kind % 16 == 15)) : shape(r);
  body.replace(body.find(kHole), kHole.size(), value);
  const Serving& sv = serving();
  try {
    switch (route.endpoint) {
      case 0:
      case 1: {
        const json parsed = parse_body(body);
        const GenerationRequest g = route.endpoint == 0 ? parse_completion_request(parsed, sv) : parse_chat_request(parsed, sv);
        for (const SamplingParams& p : serving_request(g, sv.max_model_len()).params) check_params(p);
        break;
      }
      case 2: parse_tokenize_request(parse_body(body), sv); break;
      case 3: sv.tokenizer().decode(parse_detokenize_request(parse_body(body), sv)); break;
    }
  } catch (const ApiError& e) {
    if (e.status != 400 && e.status != 404 && e.status != 503) finding("an ApiError that is not a 400, 404 or 503", e.what());
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
  for (uint32_t i = 0, n = r.below(20'000); i < n; ++i) (*s.mutable_logit_bias())[int32_t(i) - 3] = float(i % 250) - 125;
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
  ServingRequest out;
  const grpc::Status status = grpc_api::serving_request(serving(), req, {}, out);
  if (status.ok()) {
    for (const SamplingParams& p : out.params) check_params(p);
    return;
  }
  const grpc::StatusCode c = status.error_code();
  if (c != grpc::StatusCode::INVALID_ARGUMENT && c != grpc::StatusCode::OUT_OF_RANGE && c != grpc::StatusCode::UNAVAILABLE) {
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
