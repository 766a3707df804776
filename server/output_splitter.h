// A model's output, as it streams, in the parts the Responses and Messages APIs report apart: the
// reasoning of a reasoning model (reasoning_splitter.h), text, and the tool calls read from the
// text when tools were offered (tool_call_parser.h). Whitespace the model writes before its first
// call or text is held back: an answer that only calls tools has no text part, while one that ends
// with whitespace alone keeps it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include "server/openai_tools.h"
#include "server/reasoning_splitter.h"
#include "server/tool_call_parser.h"

namespace flashserve {

struct OutputParts {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> calls;
};

class OutputSplitter {
 public:
  // `tools`: what the request offered (none: everything is text); `reasoning`: how to split it off.
  OutputSplitter(const std::optional<ToolCalling>& tools, const std::optional<ReasoningMode>& reasoning);
  // The next piece of output; `last`: the output ends with it.
  OutputParts feed(std::string_view text, bool last);

 private:
  std::optional<ReasoningSplitter> reasoning_;
  std::optional<ToolCallParser> calls_;
  std::string held_;          // leading whitespace
  bool text_started_ = false;
};

}  // namespace flashserve
