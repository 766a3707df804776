#include "scheduler/suffix_index.h"

#include <algorithm>

namespace flashserve {

// The hash of a context is built from its last token backwards, so the hashes of the suffixes of
// lengths 1, 2, 3, ... ending at one position come out of one pass, each from the previous.
static constexpr uint64_t kEmptyContext = 0x243f6a8885a308d3ull;

// splitmix64's finaliser: every input bit flips about half the output bits, so the low bits that
// pick an unordered_map bucket are as good as the high ones.
static uint64_t extend(uint64_t hash, int32_t token) {
  uint64_t x = hash ^ uint32_t(token);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

SuffixIndex::SuffixIndex(int64_t max_tokens, int32_t max_depth)
    : max_tokens_(std::max<int64_t>(max_tokens, 0)), max_depth_(std::max(max_depth, 1)) {}

void SuffixIndex::add(std::span<const int32_t> output) {
  if (int64_t(output.size()) > max_tokens_) output = output.last(size_t(max_tokens_));
  if (output.empty()) return;
  while (num_tokens_ + int64_t(output.size()) > max_tokens_) {
    tally(outputs_.front(), -1);
    num_tokens_ -= int64_t(outputs_.front().size());
    outputs_.pop_front();
  }
  outputs_.emplace_back(output.begin(), output.end());
  num_tokens_ += int64_t(output.size());
  tally(output, +1);
}

void SuffixIndex::tally(std::span<const int32_t> output, int32_t delta) {
  for (size_t next = 1; next < output.size(); ++next) {
    const size_t depth = std::min(size_t(max_depth_), next);
    uint64_t hash = kEmptyContext;
    for (size_t d = 1; d <= depth; ++d) {
      hash = extend(hash, output[next - d]);
      adjust(hash, output[next], delta);
    }
  }
}

// Forgetting meets only pairs that adding counted, so a count never goes below zero.
void SuffixIndex::adjust(uint64_t context_hash, int32_t token, int32_t delta) {
  Continuations& c = contexts_[context_hash];
  auto it = std::find_if(c.next.begin(), c.next.end(), [&](const NextToken& n) { return n.token == token; });
  if (it == c.next.end()) it = c.next.insert(it, NextToken{token, 0});
  it->count += delta;
  c.total += delta;
  if (it->count == 0) c.next.erase(it);
  if (c.total == 0) contexts_.erase(context_hash);
}

const SuffixIndex::Continuations* SuffixIndex::longest_context(std::span<const int32_t> tokens, int32_t min_match,
                                                               int32_t& len) const {
  const Continuations* found = nullptr;
  len = 0;
  uint64_t hash = kEmptyContext;
  const size_t depth = std::min(size_t(max_depth_), tokens.size());
  for (size_t d = 1; d <= depth; ++d) {
    hash = extend(hash, tokens[tokens.size() - d]);
    auto it = contexts_.find(hash);
    // Every context that extends an unseen one is unseen too.
    if (it == contexts_.end()) break;
    if (int32_t(d) >= min_match) {
      found = &it->second;
      len = int32_t(d);
    }
  }
  return found;
}

SuffixIndex::NextToken SuffixIndex::most_frequent(const Continuations& c) {
  NextToken best = c.next.front();
  for (const NextToken& n : c.next) {
    if (n.count > best.count || (n.count == best.count && n.token < best.token)) best = n;
  }
  return best;
}

DraftMatch SuffixIndex::propose(std::span<const int32_t> context, int32_t min_match, int32_t max_drafts,
                                float min_share) const {
  if (max_drafts <= 0) return {};
  min_match = std::max(min_match, 1);
  // The last max_depth tokens of the context, then the drafts: all that a match can reach.
  std::vector<int32_t> window(context.end() - std::min(context.size(), size_t(max_depth_)), context.end());
  DraftMatch match;
  int32_t rematch_len = 0;  // match_len reports the first match only
  const Continuations* c = longest_context(window, min_match, match.match_len);
  while (c != nullptr && int32_t(match.tokens.size()) < max_drafts) {
    const NextToken best = most_frequent(*c);
    if (double(best.count) < double(min_share) * double(c->total)) break;
    match.tokens.push_back(best.token);
    window.push_back(best.token);
    c = longest_context(window, min_match, rematch_len);
  }
  if (match.tokens.empty()) return {};
  return match;
}

}  // namespace flashserve
