// Splits a model's output into content and tool calls while it streams. Calls are Hermes-style
// blocks (model/tool_prompt.h):
//
//   <tool_call>
//   {"name": "get_weather", "arguments": {"city": "Paris"}}
//   </tool_call>
//
// A call is announced as soon as its name is read and its arguments follow as they arrive, which
// is how OpenAI streams `tool_calls` deltas. A block that is not such a call (an unknown name, not
// JSON) is given back as content, so nothing the model wrote is lost. Whitespace between content
// and calls is dropped; text that could still become "<tool_call>" is held back until it cannot.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve {

struct ToolCallDelta {
  int32_t index;          // the call's position among this output's calls
  bool first;             // the delta that announces the call: `name` is set
  std::string name;
  std::string arguments;  // the next piece of the arguments' JSON text
};

struct ParsedOutput {
  std::string content;
  std::vector<ToolCallDelta> calls;
  bool empty() const { return content.empty() && calls.empty(); }
};

class ToolCallParser {
 public:
  // `names`: the functions the request offered; a block calling anything else stays content.
  explicit ToolCallParser(std::vector<std::string> names) : names_(std::move(names)) {}

  ParsedOutput feed(std::string_view text);
  // The output ended: what was held back, a cut-off block settled (a call whose arguments were
  // already announced stays a call; an unannounced one is parsed whole or given back as content).
  ParsedOutput finish();
  int32_t num_calls() const { return num_calls_; }

 private:
  enum class State { Text, Header, Arguments, Tail, Whole };
  enum class Scan { NeedMore, Mismatch, Done };

  void run(ParsedOutput& out);
  // Each returns whether it moved to another state (and the loop goes on).
  bool step_text(ParsedOutput& out);
  bool step_header(ParsedOutput& out);
  bool step_arguments(ParsedOutput& out);
  bool step_to_close(ParsedOutput& out);
  Scan scan_header(std::string& name, size_t& end) const;
  void settle_whole(ParsedOutput& out, bool closed);
  void start_call(ParsedOutput& out, std::string name, std::string arguments);
  void append_arguments(ParsedOutput& out, std::string_view piece);
  bool known(const std::string& name) const;

  std::vector<std::string> names_;
  State state_ = State::Text;
  std::string buf_;         // Text: what is not yet emitted
  std::string dropped_ws_;  // whitespace dropped before the current block (given back with it)
  std::string block_;       // the current block's text since <tool_call>
  size_t pos_ = 0;          // Arguments, Tail: how much of block_ is consumed
  int32_t num_calls_ = 0;
  // Arguments scanning: nesting depth and string state of the JSON value being streamed.
  int32_t depth_ = 0;
  bool in_string_ = false, escaped_ = false;
};

}  // namespace flashserve
