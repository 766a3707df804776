#include "server/output_splitter.h"

#include <utility>

namespace flashserve {

OutputSplitter::OutputSplitter(const std::optional<ToolCalling>& tools) {
  if (tools) calls_.emplace(tools->names);
}

ParsedOutput OutputSplitter::feed(std::string_view text, bool last) {
  ParsedOutput out{std::string(text), {}};
  if (calls_) {
    out = calls_->feed(text);
    if (last) {
      ParsedOutput rest = calls_->finish();
      out.content += rest.content;
      out.calls.insert(out.calls.end(), rest.calls.begin(), rest.calls.end());
    }
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
