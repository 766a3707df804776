// libFuzzer target: the reasoning splitter (server/reasoning_splitter.h) on arbitrary model output.
// The first byte says whether the output starts inside the reasoning and seeds how the rest is cut
// into pieces. Findings: a crash, a sanitizer report, an exception, a split that depends on how the
// output was cut, or text lost from an output with no tags.
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>

#include "server/reasoning_splitter.h"
#include "tests/fuzz/finding.h"

namespace {

using namespace flashserve;

[[noreturn]] void finding(const char* what, std::string_view detail = {}) {
  fuzz::finding("fuzz_reasoning_split", what, detail);
}

// Pieces of 1 + (seed-driven) bytes; cut 0: the whole output at once.
SplitOutput split(std::string_view text, bool inside, uint32_t cut) {
  ReasoningSplitter s(ReasoningMode{ReasoningTags{}, inside});
  SplitOutput out;
  size_t pos = 0;
  do {
    const size_t n = cut == 0 ? text.size() : std::min(text.size() - pos, size_t(1 + (cut = cut * 1103515245u + 12345u) % 7));
    const SplitOutput piece = s.feed(text.substr(pos, n), pos + n == text.size());
    out.reasoning += piece.reasoning;
    out.content += piece.content;
    pos += n;
  } while (pos < text.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 8192) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool inside = data[0] & 1;
  try {
    const SplitOutput whole = split(text, inside, 0);
    const SplitOutput cut = split(text, inside, data[0] | 1);
    if (cut.reasoning != whole.reasoning || cut.content != whole.content) {
      finding("the split depends on how the output was cut", text);
    }
    const bool tagless = text.find("<think>") == std::string_view::npos && text.find("</think>") == std::string_view::npos;
    if (tagless && !inside && whole.content != text) finding("an output without tags is not all content", text);
  } catch (const std::exception& e) {
    finding("an exception escaped", e.what());
  }
  return 0;
}
