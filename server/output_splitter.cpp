#include "server/output_splitter.h"

#include <utility>

namespace flashserve {

OutputSplitter::OutputSplitter(const std::optional<ToolCalling>& tools, const std::optional<ReasoningMode>& reasoning) {
  if (tools) calls_.emplace(tools->names);
  if (reasoning) reasoning_.emplace(*reasoning);
}

OutputParts OutputSplitter::feed(std::string_view text, bool last) {
  OutputParts out;
  SplitOutput split{"", std::string(text)};
  if (reasoning_) split = reasoning_->feed(text, last);
  out.reasoning = std::move(split.reasoning);
  out.content = std::move(split.content);
  if (calls_) {
    ParsedOutput parsed = calls_->feed(out.content);
    if (last) {
      ParsedOutput rest = calls_->finish();
      parsed.content += rest.content;
      parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    out.content = std::move(parsed.content);
    out.calls = std::move(parsed.calls);
  }
  if (text_started_) return out;
  held_ += out.content;
  out.content.clear();
  const bool blank = held_.find_first_not_of(" \t\r\n") == std::string::npos;
  const bool ends_without_calls = last && (!calls_ || calls_->num_calls() == 0);
  if (!blank || ends_without_calls) {
    out.content = std::exchange(held_, "");
    text_started_ = true;
  }
  return out;
}

}  // namespace flashserve
