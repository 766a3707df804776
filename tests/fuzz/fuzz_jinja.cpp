// libFuzzer target: the Jinja engine on an arbitrary template (a model file's chat template is
// untrusted input). The input is the template source; it is parsed and, if it parses, rendered
// with a chat-like context (messages with a tool call and a tool result, tools, special tokens)
// under small limits. A TemplateError is the right answer to a bad or hostile template, and it must
// carry a position. Anything else is a finding: a crash, a sanitizer report, a leak, another
// exception, a hang (the limits bound every render), or output past the output limit.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "model/jinja/template.h"
#include "tests/fuzz/finding.h"

namespace {

using namespace flashserve::jinja;

Limits fuzz_limits() {
  Limits l;
  l.max_output_bytes = 64 << 10;
  l.max_depth = 32;
  l.max_loop_iterations = 20000;
  l.max_work = 2'000'000;
  return l;
}

const std::vector<std::pair<std::string, Value>>& context() {
  static const auto vars = [] {
    Budget budget(fuzz_limits());
    const auto j = nlohmann::ordered_json::parse(R"({
      "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris? <think>no</think>"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call12345", "type": "function",
          "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}}]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "{\"temp\": 21.5}"},
        {"role": "assistant", "content": "Sunny, 21.5 °C.", "reasoning_content": "easy"}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "enable_thinking": false,
      "documents": null})");
    std::vector<std::pair<std::string, Value>> out;
    for (auto it = j.begin(); it != j.end(); ++it) out.emplace_back(it.key(), from_json(it.value(), budget));
    return out;
  }();
  return vars;
}

void check_error(const TemplateError& e, std::string_view source) {
  if (!e.has_position()) flashserve::fuzz::finding("fuzz_jinja", "a TemplateError without a position", source);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  const Limits limits = fuzz_limits();
  try {
    const Template t = Template::parse(source);
    const std::string out = t.render(context(), limits);
    if (out.size() > limits.max_output_bytes) {
      flashserve::fuzz::finding("fuzz_jinja", "output past max_output_bytes", source);
    }
  } catch (const TemplateError& e) {
    check_error(e, source);
  } catch (const std::exception& e) {
    flashserve::fuzz::finding("fuzz_jinja", (std::string("unexpected exception: ") + e.what()).c_str(), source);
  }
  return 0;
}
