// libFuzzer target: the tool-call reader (server/tool_call_parser.h) on arbitrary model output.
// The first byte seeds how the rest is cut into pieces. Findings: a crash, a sanitizer report, an
// exception, a result that depends on how the output was cut, text lost when no call was found,
// or call deltas out of order.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"
#include "tests/fuzz/finding.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_tool_calls", what, detail);
}

struct Result {
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Result&) const = default;
};

void collect(Result& r, const ParsedOutput& p, std::string_view text) {
  r.content += p.content;
  for (const ToolCallDelta& d : p.calls) {
    if (d.first) {
      if (d.index != int32_t(r.calls.size())) finding("a call announced out of order", text);
      r.calls.emplace_back(d.name, "");
    } else if (d.index != int32_t(r.calls.size()) - 1) {
      finding("arguments for a call that is not the latest", text);
    }
    r.calls.back().second += d.arguments;
  }
}

Result parse(std::string_view text, uint8_t seed) {
  ToolCallParser parser({"add", "get_weather", "f"});
  Result r;
  uint32_t state = seed;
  for (size_t pos = 0; pos < text.size();) {
    state = state * 1103515245u + 12345u;
    const size_t n = seed == 0 ? text.size() : 1 + (state >> 16) % 7;
    collect(r, parser.feed(text.substr(pos, std::min(n, text.size() - pos))), text);
    pos += n;
  }
  collect(r, parser.finish(), text);
  if (int32_t(r.calls.size()) != parser.num_calls()) finding("num_calls disagrees with the calls announced", text);
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    const Result whole = parse(text, 0);
    if (!(parse(text, data[0] | 1) == whole)) finding("the result depends on how the output was cut", text);
    if (whole.calls.empty() && whole.content != text) finding("no call found, yet the content is not the output", text);
  } catch (const std::exception& e) {
    finding("an exception escaped", e.what());
  }
  return 0;
}
