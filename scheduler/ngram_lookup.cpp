#include "scheduler/ngram_lookup.h"

#include <algorithm>

namespace flashserve {

// How many tokens ending at `end` equal the tokens ending at the last position, up to `limit`.
// Comparing from the last token backwards rejects most positions after one comparison.
static int32_t common_suffix(std::span<const int32_t> tokens, size_t end, int32_t limit) {
  const size_t last = tokens.size() - 1;
  int32_t len = 0;
  while (len < limit && tokens[end - len] == tokens[last - len]) ++len;
  return len;
}

// One backward scan answers every n at once: the longest common suffix seen so far only grows, and
// raising it only at a strictly longer match keeps the most recent position for each length. The
// scan stops at the first full-length match, which is the answer for n = max_ngram.
DraftMatch ngram_lookup(std::span<const int32_t> tokens, int32_t min_ngram, int32_t max_ngram, int32_t max_drafts) {
  min_ngram = std::max(min_ngram, 1);
  if (max_drafts <= 0 || max_ngram < min_ngram || tokens.size() < 2) return {};
  int32_t best_len = 0;
  size_t best_end = 0;
  for (size_t end = tokens.size() - 1; end > 0 && best_len < max_ngram;) {
    --end;
    const int32_t limit = int32_t(std::min<size_t>(size_t(max_ngram), end + 1));
    const int32_t len = common_suffix(tokens, end, limit);
    if (len > best_len) {
      best_len = len;
      best_end = end;
    }
  }
  if (best_len < min_ngram) return {};
  const size_t first = best_end + 1;  // < tokens.size(): the occurrence ends before the last token
  const size_t count = std::min(tokens.size() - first, size_t(max_drafts));
  DraftMatch match;
  match.tokens.assign(tokens.begin() + first, tokens.begin() + first + count);
  match.match_len = best_len;
  return match;
}

}  // namespace flashserve
