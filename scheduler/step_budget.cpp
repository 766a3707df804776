#include "scheduler/step_budget.h"

#include <algorithm>
#include <cmath>

namespace flashserve {

// Each new step weighs as much as the previous ~50 together with this forgetting factor's decay:
// fresh enough to follow a machine getting busier, steady enough not to chase noise.
static constexpr double kForget = 0.98;

StepBudget::StepBudget(double target_seconds, double decode_ratio, int32_t max_tokens, int32_t min_tokens)
    : target_(target_seconds > 0 ? target_seconds : INFINITY),
      decode_ratio_(decode_ratio > 0 ? decode_ratio : INFINITY),
      max_tokens_(max_tokens), min_tokens_(std::min(min_tokens, max_tokens)) {}

void StepBudget::observe(int32_t tokens, double seconds) {
  if (tokens <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const double t = tokens;
  s0_ = kForget * s0_ + 1;
  s1_ = kForget * s1_ + t;
  s2_ = kForget * s2_ + t * t;
  sy_ = kForget * sy_ + seconds;
  sty_ = kForget * sty_ + t * seconds;
}

bool StepBudget::fitted(double& fixed, double& per_token) const {
  const double det = s0_ * s2_ - s1_ * s1_;
  // Steps of a single size leave the slope undetermined (det ~ 0 relative to the sums).
  if (s0_ < 2 || det <= 1e-9 * s0_ * s2_) return false;
  per_token = (s0_ * sty_ - s1_ * sy_) / det;
  fixed = (sy_ - per_token * s1_) / s0_;
  if (!(per_token > 0)) return false;  // noise can fit a flat or falling line: no basis for a cap
  fixed = std::max(fixed, 0.0);
  return true;
}

double StepBudget::draft_threshold(int32_t decoding, double fallback) const {
  double fixed = 0, per_token = 0;
  if (decoding <= 0 || !fitted(fixed, per_token)) return fallback;
  const double rows = decoding;
  return per_token * rows / (fixed + per_token * rows);
}

int32_t StepBudget::next(int32_t decoding) const {
  double fixed = 0, per_token = 0;
  if (decoding <= 0 || !fitted(fixed, per_token)) return max_tokens_;
  const double target = std::min(target_, decode_ratio_ * (fixed + per_token * decoding));
  const double fits = (target - fixed) / per_token;
  const int32_t floor = std::min(max_tokens_, decoding + min_tokens_);
  if (!(fits < double(max_tokens_))) return max_tokens_;
  return std::clamp(int32_t(fits), floor, max_tokens_);
}

}  // namespace flashserve
