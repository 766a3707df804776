#include "scheduler/output_text.h"

#include <algorithm>
#include <string_view>

namespace flashserve {
namespace {

bool is_continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

struct StopMatch {
  size_t at = std::string_view::npos;  // where it starts in the text; npos: none occurs
  const std::string* stop = nullptr;
};

// The stop string that starts earliest in `text` (of two starting at the same place, the one listed first).
StopMatch earliest_stop(std::string_view text, const std::vector<std::string>& stop) {
  StopMatch best;
  for (const std::string& s : stop) {
    const size_t at = text.find(s);
    if (at < best.at) best = {at, &s};
  }
  return best;
}

// Length of the longest suffix of `text` that begins some stop string: text that may still become
// one. Full matches are excluded (the caller found none), so only proper prefixes count.
size_t pending_stop_prefix(std::string_view text, const std::vector<std::string>& stop) {
  size_t longest = 0;
  for (const std::string& s : stop) {
    for (size_t len = std::min(text.size(), s.size() - 1); len > longest; --len) {
      if (text.substr(text.size() - len) == std::string_view(s).substr(0, len)) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

}  // namespace

OutputText::OutputText(const Tokenizer& tok, std::vector<std::string> stop)
    : decoder_(tok, /*render_special=*/false), stop_(std::move(stop)) {
  for (const std::string& s : stop_) max_stop_len_ = std::max(max_stop_len_, s.size());
}

OutputText::Delta OutputText::push(int32_t token) {
  held_ += decoder_.push(token);
  Delta delta;
  if (max_stop_len_ == 0) {
    delta.text = std::move(held_);
    held_.clear();
    return delta;
  }
  const StopMatch match = earliest_stop(held_, stop_);
  if (match.stop) {
    delta.text = held_.substr(0, match.at);
    delta.stop = *match.stop;
    held_.clear();  // the stop string and whatever followed it in this token are never released
    return delta;
  }
  // The decoder only emits whole characters, but a stop string need not begin on one.
  size_t cut = held_.size() - pending_stop_prefix(held_, stop_);
  while (cut > 0 && cut < held_.size() && is_continuation_byte(held_[cut])) --cut;
  delta.text = held_.substr(0, cut);
  held_.erase(0, cut);
  return delta;
}

std::string OutputText::flush() {
  std::string rest = std::move(held_) + decoder_.flush();
  held_.clear();
  return rest;
}

}  // namespace flashserve
