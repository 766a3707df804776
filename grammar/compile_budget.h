// What compiling one grammar's token tables (token_masks.h) may spend, and how its caller stops it
// early. The work is one walk of the vocabulary's token trie per character position of the
// expanded grammar, each walk at most the trie's size, so the budget is counted in full-trie walks:
// the same grammar costs the same share on a 49k or a 150k vocabulary. kMaxWalks lets a string of
// maxLength 1000 through (its 1000 positions walk almost the whole trie each); [\s\S]{9990} is
// refused once a sample of its positions shows it would pass the budget, within a fraction of a
// second rather than after minutes of a worker's time.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include "grammar/grammar.h"

namespace flashserve::grammar {

// The compile was stopped from outside: its client left, or the server is stopping.
class CompileCancelled : public GrammarError {
 public:
  CompileCancelled() : GrammarError("grammar compile cancelled") {}
};

class CompileBudget {
 public:
  static constexpr uint64_t kMaxWalks = 1100;
  // Positions walked before their average cost is trusted to project the rest.
  static constexpr size_t kSampledPositions = 32;

  // `cancelled` (may be empty) is asked after every position's walk.
  explicit CompileBudget(std::function<bool()> cancelled = {}, uint64_t max_walks = kMaxWalks)
      : max_walks_(max_walks), cancelled_(std::move(cancelled)) {}

  // Once, before walking: the trie's size and how many positions there are to walk.
  void start(uint64_t trie_nodes, size_t positions) {
    walk_steps_ = std::max<uint64_t>(trie_nodes, 1);
    max_steps_ = max_walks_ * walk_steps_;
    positions_ = positions;
  }
  // One position's walk took `steps`. Throws GrammarError when the steps so far, or the projection
  // of the sample's average over the positions left, pass the budget; CompileCancelled once cancelled.
  void spend(uint64_t steps) {
    spent_ += steps;
    ++walked_;
    const uint64_t projected =
        walked_ >= kSampledPositions || walked_ == positions_ ? spent_ + spent_ / walked_ * (positions_ - walked_) : 0;
    if (spent_ > max_steps_ || projected > max_steps_) {
      const uint64_t walks = (std::max(spent_, projected) + walk_steps_ - 1) / walk_steps_;
      throw GrammarError("grammar too complex: precomputing its token masks would take " + std::to_string(walks) +
                         " walks of the vocabulary (" + std::to_string(positions_) +
                         " character positions), over the limit of " + std::to_string(max_walks_) +
                         "; long bounded repetitions ({m,n}, maxLength, maxItems) are what usually costs");
    }
    if (cancelled_ && cancelled_()) throw CompileCancelled();
  }
  uint64_t spent() const { return spent_; }

 private:
  uint64_t max_walks_;
  uint64_t walk_steps_ = 1;  // a full walk: the trie's size
  uint64_t max_steps_ = 0;
  size_t positions_ = 0;
  uint64_t spent_ = 0;
  size_t walked_ = 0;
  std::function<bool()> cancelled_;
};

}  // namespace flashserve::grammar
