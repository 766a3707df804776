// Splits a reasoning model's output, as it streams, into its reasoning (between <think> and
// </think>, as Qwen3 and DeepSeek-R1 write it) and its answer. The output opens with the tag
// itself, or is inside the reasoning from its first token when the prompt already ended with the
// tag (DeepSeek-R1's templates do). Whitespace around the reasoning is dropped (templates put
// newlines there); text that could still become a tag is held back until it cannot.
#pragma once
#include <string>
#include <string_view>

namespace flashserve {

struct ReasoningTags {
  std::string open = "<think>";
  std::string close = "</think>";
};

// How one request's output is split: the model's tags, and whether the prompt left it inside them.
struct ReasoningMode {
  ReasoningTags tags;
  bool starts_inside = false;
};

struct SplitOutput {
  std::string reasoning;
  std::string content;
};

class ReasoningSplitter {
 public:
  explicit ReasoningSplitter(const ReasoningMode& mode);
  // The next piece of output; `last`: the output ends with it (whatever was held back comes out).
  SplitOutput feed(std::string_view text, bool last);

 private:
  enum class State { Opening, Reasoning, AfterReasoning, Content };
  void step_opening(bool last);
  void step_reasoning(SplitOutput& out, bool last);
  void step_after(bool last);

  ReasoningTags tags_;
  State state_;
  std::string held_;
  bool reasoning_started_ = false;  // leading whitespace of the reasoning is dropped
};

}  // namespace flashserve
