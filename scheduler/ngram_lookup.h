// Prompt lookup decoding: speculative drafts without a draft model. A sequence that quotes its
// prompt (code edits, summaries with citations, retrieval answers) or repeats itself tends to go on
// the way it went after the last time its most recent tokens appeared, so the tokens that followed
// that earlier occurrence are proposed as drafts for the model to verify.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace flashserve {

// A proposal and how long a context suffix it matched (longer: more trustworthy).
struct DraftMatch {
  std::vector<int32_t> tokens;
  int32_t match_len = 0;  // 0 exactly when tokens is empty
};

// Prompt lookup: for n from max_ngram down to min_ngram, find the most recent earlier occurrence of
// the last n tokens of `tokens` (prompt + output so far) and propose the tokens that followed it (at
// most max_drafts, never running past the end of `tokens`). The first n that matches wins. The
// occurrence must end before the final token; it may overlap the suffix, so a repeating pattern
// proposes its own next period. Empty when nothing matches, max_drafts <= 0 or
// max_ngram < max(min_ngram, 1). O(tokens.size() * max_ngram), no allocation but the result.
DraftMatch ngram_lookup(std::span<const int32_t> tokens, int32_t min_ngram, int32_t max_ngram, int32_t max_drafts);

}  // namespace flashserve
