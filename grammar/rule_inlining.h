// Gives each use of a small, non-recursive rule its own copy of it (and of everything it uses).
//
// Token tables (token_masks.h) judge a token from one position with the stack cut where the
// grammar stops saying what follows: at a rule used from several places. A shared `ws` rule,
// used after every ':' and ',', would be cut right there, leaving every token that starts with a
// space "uncertain" (thousands in a BPE vocabulary) and each mask a scan of them. A copy per use
// knows what follows it, so the tables decide those tokens once, ahead of time.
#pragma once
#include "grammar/grammar.h"

namespace flashserve::grammar {

// Rules of at most this many elements (their own and their copies' in total) are copied per use.
constexpr size_t kMaxInlinedRuleElements = 128;

// The same language; the result grows by at most a few times the input, then shares again.
Grammar inline_small_rules(const Grammar& g);

}  // namespace flashserve::grammar
