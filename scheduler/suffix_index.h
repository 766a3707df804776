// Suffix decoding over the recent outputs of this server: agentic and other repetitive workloads
// produce outputs that repeat earlier outputs, so the continuations of a context counted over those
// outputs make good drafts. Each context of 1..max_depth tokens is keyed by a 64-bit hash and counts
// the tokens that followed it. Two contexts whose hashes collide share their counts: for a proposer
// that is harmless (the model rejects a wrong draft) and rare (about n^2 / 2^65 for n contexts), so
// the index stores no tokens per context.
#pragma once
#include <cstdint>
#include <deque>
#include <span>
#include <unordered_map>
#include <vector>

#include "scheduler/ngram_lookup.h"

namespace flashserve {

class SuffixIndex {
 public:
  // Remembers the most recent outputs, up to `max_tokens` tokens in all (older ones are forgotten
  // whole, first in first out), with contexts of 1..max_depth tokens.
  SuffixIndex(int64_t max_tokens, int32_t max_depth);

  // A finished request's output tokens. Only what is passed is learned: the index serves repeats
  // across requests, and a request's own prompt is ngram_lookup's to search. An output longer than
  // max_tokens keeps only its last max_tokens tokens.
  void add(std::span<const int32_t> output);

  // Drafts for a sequence whose tokens so far end with `context`: the longest suffix of `context`
  // (up to max_depth, at least min_match tokens) seen in the index; then, up to max_drafts times,
  // its most frequent next token (ties: the smaller id) while that token's share of the context's
  // continuations is at least min_share, re-matching the longest suffix after each appended token.
  // match_len: the suffix length first matched.
  DraftMatch propose(std::span<const int32_t> context, int32_t min_match, int32_t max_drafts, float min_share) const;

  int64_t num_tokens() const { return num_tokens_; }  // tokens currently remembered

 private:
  struct NextToken {
    int32_t token;
    int32_t count;
  };
  // The tokens seen after one context; a handful in practice, so a vector scanned linearly.
  struct Continuations {
    int64_t total = 0;
    std::vector<NextToken> next;
  };

  // Adds `delta` (+1 or -1) for every (context, next token) pair of `output`; forgetting an output
  // thus removes exactly what adding it counted.
  void tally(std::span<const int32_t> output, int32_t delta);
  void adjust(uint64_t context_hash, int32_t token, int32_t delta);
  // The most frequent continuation; the smaller id on a tie, so that proposals never depend on the
  // order in which outputs were added.
  static NextToken most_frequent(const Continuations& c);
  // The longest context of at least min_match tokens ending `tokens` that has continuations.
  const Continuations* longest_context(std::span<const int32_t> tokens, int32_t min_match, int32_t& len) const;

  int64_t max_tokens_;
  int32_t max_depth_;
  int64_t num_tokens_ = 0;
  std::deque<std::vector<int32_t>> outputs_;  // oldest first
  std::unordered_map<uint64_t, Continuations> contexts_;
};

}  // namespace flashserve
