#include "server/tool_call_parser.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/bounded_json.h"

namespace flashserve {
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool all_ws(std::string_view s) { return std::all_of(s.begin(), s.end(), is_ws); }

// Where a suffix of `s` that is a proper prefix of `tag` starts (s.size() when none): that text
// may still turn into the tag.
size_t partial_tag_start(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return s.size() - n;
  }
  return s.size();
}

// One character of a JSON string after its opening quote: whether it is the closing quote.
bool closes_string(char c, bool& escaped) {
  if (escaped) {
    escaped = false;
    return false;
  }
  escaped = c == '\\';
  return c == '"';
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

ParsedOutput ToolCallParser::feed(std::string_view text) {
  ParsedOutput out;
  (state_ == State::Text ? buf_ : block_).append(text);
  run(out);
  return out;
}

ParsedOutput ToolCallParser::finish() {
  ParsedOutput out;
  switch (state_) {
    case State::Text:
      if (num_calls_ == 0 || !all_ws(buf_)) out.content += buf_;
      break;
    case State::Header:
    case State::Whole:
      settle_whole(out, /*closed=*/false);
      break;
    case State::Arguments:
    case State::Tail:
      break;  // announced: it stays a call, cut off where the output ended
  }
  state_ = State::Text;
  buf_.clear();
  block_.clear();
  return out;
}

void ToolCallParser::run(ParsedOutput& out) {
  for (;;) {
    switch (state_) {
      case State::Text:
        if (!step_text(out)) return;
        break;
      case State::Header:
        if (!step_header(out)) return;
        break;
      case State::Arguments:
        if (!step_arguments(out)) return;
        break;
      case State::Tail:
      case State::Whole:
        if (!step_to_close(out)) return;
        break;
    }
  }
}

// Content up to the last character that cannot be part of what follows: trailing whitespace
// waits (it is dropped if a block comes next) and so does a possible start of "<tool_call>".
bool ToolCallParser::step_text(ParsedOutput& out) {
  const size_t at = buf_.find(kOpen);
  const size_t limit = at != std::string::npos ? at : partial_tag_start(buf_, kOpen);
  size_t keep = limit;
  while (keep > 0 && is_ws(buf_[keep - 1])) --keep;
  out.content.append(buf_, 0, keep);
  if (at == std::string::npos) {
    buf_.erase(0, keep);
    return false;
  }
  dropped_ws_ = buf_.substr(keep, at - keep);
  block_ = buf_.substr(at + kOpen.size());
  buf_.clear();
  state_ = State::Header;
  return true;
}

bool ToolCallParser::step_header(ParsedOutput& out) {
  std::string name;
  size_t end = 0;
  switch (scan_header(name, end)) {
    case Scan::NeedMore:
      return false;
    case Scan::Mismatch:
      state_ = State::Whole;
      return true;
    case Scan::Done:
      break;
  }
  start_call(out, std::move(name), "");
  state_ = State::Arguments;
  pos_ = end;
  depth_ = 0;
  in_string_ = escaped_ = false;
  return true;
}

// `{ "name": "<known name>", "arguments": ` followed by the '{' of an object: end is that '{'.
ToolCallParser::Scan ToolCallParser::scan_header(std::string& name, size_t& end) const {
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < block_.size() && is_ws(block_[i])) ++i;
  };
  auto expect = [&](std::string_view lit) {
    for (char c : lit) {
      if (i == block_.size()) return Scan::NeedMore;
      if (block_[i++] != c) return Scan::Mismatch;
    }
    return Scan::Done;
  };
  for (std::string_view part : {"{", "\"name\"", ":"}) {
    skip_ws();
    if (Scan s = expect(part); s != Scan::Done) return s;
  }
  skip_ws();
  if (i == block_.size()) return Scan::NeedMore;
  if (block_[i] != '"') return Scan::Mismatch;
  const size_t name_start = i++;
  for (bool escaped = false;; ++i) {
    if (i == block_.size()) return Scan::NeedMore;
    if (closes_string(block_[i], escaped)) break;
  }
  ++i;
  const auto decoded = parse_bounded_json_or_discarded<nlohmann::json>(block_.substr(name_start, i - name_start));
  if (!decoded.is_string() || !known(decoded.get<std::string>())) return Scan::Mismatch;
  name = decoded.get<std::string>();
  for (std::string_view part : {",", "\"arguments\"", ":"}) {
    skip_ws();
    if (Scan s = expect(part); s != Scan::Done) return s;
  }
  skip_ws();
  if (i == block_.size()) return Scan::NeedMore;
  if (block_[i] != '{') return Scan::Mismatch;
  end = i;
  return Scan::Done;
}

// Streams the arguments object up to its closing brace.
bool ToolCallParser::step_arguments(ParsedOutput& out) {
  size_t i = pos_;
  bool closed = false;
  for (; i < block_.size() && !closed; ++i) {
    const char c = block_[i];
    if (in_string_) {
      in_string_ = !closes_string(c, escaped_);
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      closed = true;
    }
  }
  if (i > pos_) append_arguments(out, std::string_view(block_).substr(pos_, i - pos_));
  pos_ = i;
  if (!closed) return false;
  state_ = State::Tail;
  return true;
}

// Tail: the rest of a streamed call up to </tool_call> (its closing brace; anything else there is
// dropped). Whole: a block that did not start like a call, read whole and then judged.
bool ToolCallParser::step_to_close(ParsedOutput& out) {
  const size_t close = block_.find(kClose, state_ == State::Tail ? pos_ : 0);
  if (close == std::string::npos) return false;
  std::string rest = block_.substr(close + kClose.size());
  block_.resize(close);
  if (state_ == State::Whole) settle_whole(out, /*closed=*/true);
  state_ = State::Text;
  block_.clear();
  dropped_ws_.clear();
  buf_ = std::move(rest);
  return true;
}

void ToolCallParser::settle_whole(ParsedOutput& out, bool closed) {
  const auto call = parse_bounded_json_or_discarded<nlohmann::ordered_json>(trimmed(block_));
  if (call.is_object() && call.size() == 2 && call.contains("name") && call.contains("arguments") &&
      call["name"].is_string() && known(call["name"].get<std::string>())) {
    const auto& args = call["arguments"];
    if (args.is_object()) return start_call(out, call["name"].get<std::string>(), args.dump());
    // Some models write the arguments as a JSON string, as the API carries them.
    if (args.is_string() && parse_bounded_json_or_discarded<nlohmann::json>(args.get<std::string>()).is_object()) {
      return start_call(out, call["name"].get<std::string>(), args.get<std::string>());
    }
  }
  out.content += dropped_ws_;
  out.content += kOpen;
  out.content += block_;
  if (closed) out.content += kClose;
}

void ToolCallParser::start_call(ParsedOutput& out, std::string name, std::string arguments) {
  out.calls.push_back({num_calls_++, true, std::move(name), std::move(arguments)});
}

void ToolCallParser::append_arguments(ParsedOutput& out, std::string_view piece) {
  if (!out.calls.empty() && out.calls.back().index == num_calls_ - 1) {
    out.calls.back().arguments += piece;
  } else {
    out.calls.push_back({num_calls_ - 1, false, "", std::string(piece)});
  }
}

bool ToolCallParser::known(const std::string& name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace flashserve
