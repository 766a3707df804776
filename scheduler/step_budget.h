// How many tokens the next engine step may carry so that it ends within a latency target. A step's
// time is close to a + b * tokens on every backend (a: reading the weights once, which a decode step
// of any width pays; b: each token's share of the matmuls), so the engine fits a and b to the steps
// it runs (least squares, recent steps weighted most) and, while requests are streaming tokens,
// caps a step at the tokens that fit the target. The target is the shorter of an absolute time and
// a multiple of the decode-only step the fit predicts for the streams at hand: a small model's
// decode step may take a fraction of the absolute time, and a prompt chunk that fills it would
// stretch the gap between two of a stream's tokens to several decode steps. With nobody streaming,
// a step takes the full max_num_batched_tokens: a lone prompt is then not slowed down for no one.
#pragma once
#include <cstdint>

namespace flashserve {

class StepBudget {
 public:
  // target_seconds: the longest a step may take while tokens stream; decode_ratio: the longest as a
  // multiple of the decode-only step (either <= 0: that bound is off; both: every step may take
  // max_tokens). min_tokens: the least a capped step still carries beyond its decode tokens, so
  // prompts always make progress.
  StepBudget(double target_seconds, double decode_ratio, int32_t max_tokens, int32_t min_tokens = 16);

  // One step that ran `tokens` tokens in `seconds`.
  void observe(int32_t tokens, double seconds);
  // Tokens for the next step, when `decoding` running requests are streaming (each needs one).
  int32_t next(int32_t decoding) const;

  // What one more row costs, as a share of a token, in a step where `decoding` requests each
  // decode one: b / ((a + b * decoding) / decoding). A speculative draft pays for its row when its
  // chance of being kept is at least this (`fallback` until the model is fitted).
  double draft_threshold(int32_t decoding, double fallback) const;
  // The fitted model (seconds, seconds per token); false until two distinct step sizes were seen.
  bool fitted(double& fixed, double& per_token) const;

 private:
  double target_, decode_ratio_;  // a bound that is off: infinity
  int32_t max_tokens_, min_tokens_;
  // Exponentially weighted sums over the observed steps: of 1, t, t^2, y, t * y.
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sty_ = 0;
};

}  // namespace flashserve
