#include "server/reasoning_splitter.h"

#include <algorithm>

namespace flashserve {
namespace {

constexpr std::string_view kSpace = " \t\r\n";

// Where a suffix of `text` that is a proper prefix of `tag` starts (text.size() when none).
size_t partial_tag_start(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return text.size() - n;
  }
  return text.size();
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(const ReasoningMode& mode)
    : tags_(mode.tags), state_(mode.starts_inside ? State::Reasoning : State::Opening) {}

SplitOutput ReasoningSplitter::feed(std::string_view text, bool last) {
  held_ += text;
  SplitOutput out;
  for (;;) {
    const State before = state_;
    switch (state_) {
      case State::Opening: step_opening(last); break;
      case State::Reasoning: step_reasoning(out, last); break;
      case State::AfterReasoning: step_after(last); break;
      case State::Content:
        out.content += held_;
        held_.clear();
        break;
    }
    if (state_ == before) return out;
  }
}

// Whitespace, then the open tag: reasoning. Anything else: the whole output is the answer.
void ReasoningSplitter::step_opening(bool last) {
  const size_t start = std::min(held_.find_first_not_of(kSpace), held_.size());
  const std::string_view rest = std::string_view(held_).substr(start);
  if (rest.starts_with(tags_.open)) {
    held_.erase(0, start + tags_.open.size());
    state_ = State::Reasoning;
  } else if (last || (!rest.empty() && !std::string_view(tags_.open).starts_with(rest))) {
    state_ = State::Content;
  }
}

void ReasoningSplitter::step_reasoning(SplitOutput& out, bool last) {
  if (!reasoning_started_) {
    held_.erase(0, std::min(held_.find_first_not_of(kSpace), held_.size()));
    if (held_.empty() && !last) return;
    reasoning_started_ = true;
  }
  const size_t close = held_.find(tags_.close);
  const bool closed = close != std::string::npos;
  // What may still turn out to end the reasoning -- whitespace, then part of the tag -- waits.
  const size_t end = closed ? close : last ? held_.size() : partial_tag_start(held_, tags_.close);
  const size_t text_end = end == 0 ? 0 : held_.find_last_not_of(kSpace, end - 1) + 1;
  out.reasoning += held_.substr(0, text_end);
  if (closed) {
    held_.erase(0, close + tags_.close.size());
    state_ = State::AfterReasoning;
  } else {
    held_.erase(0, last ? held_.size() : text_end);
  }
}

// The answer's leading whitespace goes with the reasoning's tag.
void ReasoningSplitter::step_after(bool last) {
  held_.erase(0, std::min(held_.find_first_not_of(kSpace), held_.size()));
  if (!held_.empty() || last) state_ = State::Content;
}

}  // namespace flashserve
