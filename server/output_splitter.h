// A model's output, as it streams, in the parts the Responses and Messages APIs report apart: text,
// and the tool calls read from it when tools were offered (tool_call_parser.h). Whitespace the
// model writes before its first call or text is held back: an answer that only calls tools has no
// text part, while one that ends with whitespace alone keeps it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include "server/openai_tools.h"
#include "server/tool_call_parser.h"

namespace flashserve {

class OutputSplitter {
 public:
  // `tools`: what the request offered (none: everything is text).
  explicit OutputSplitter(const std::optional<ToolCalling>& tools);
  // The next piece of output; `last`: the output ends with it.
  ParsedOutput feed(std::string_view text, bool last);

 private:
  std::optional<ToolCallParser> calls_;
  std::string held_;          // leading whitespace
  bool text_started_ = false;
};

}  // namespace flashserve
