// The two draft proposers of speculative decoding on hand-made token sequences: prompt lookup over a
// sequence's own tokens, and the suffix index over recent outputs. Each checks the exact drafts.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>

#include "scheduler/ngram_lookup.h"
#include "scheduler/suffix_index.h"

namespace flashserve {
namespace {

using Tokens = std::vector<int32_t>;

// The rule as documented, one n at a time, one start position at a time: the reference the one-pass
// scan must agree with.
DraftMatch lookup_by_definition(const Tokens& t, int32_t min_ngram, int32_t max_ngram, int32_t max_drafts) {
  const int64_t size = int64_t(t.size());
  if (max_drafts <= 0) return {};
  for (int64_t n = max_ngram; n >= std::max(min_ngram, 1); --n) {
    for (int64_t start = size - 1 - n; start >= 0; --start) {
      if (!std::equal(t.begin() + start, t.begin() + start + n, t.end() - n)) continue;
      const int64_t first = start + n, count = std::min<int64_t>(size - first, max_drafts);
      return {Tokens(t.begin() + first, t.begin() + first + count), int32_t(n)};
    }
  }
  return {};
}

TEST(NgramLookup, NoMatchProposesNothing) {
  const DraftMatch m = ngram_lookup(Tokens{1, 2, 3, 4, 5}, 1, 3, 4);
  EXPECT_TRUE(m.tokens.empty());
  EXPECT_EQ(m.match_len, 0);
}

// "1 2 3" occurred once, long ago; "2 3" more recently. The longer match wins when allowed.
TEST(NgramLookup, LongestNgramWinsOverRecency) {
  const Tokens t{1, 2, 3, 50, 7, 2, 3, 60, 1, 2, 3};
  DraftMatch m = ngram_lookup(t, 1, 3, 2);
  EXPECT_EQ(m.tokens, (Tokens{50, 7}));
  EXPECT_EQ(m.match_len, 3);
  m = ngram_lookup(t, 1, 2, 2);
  EXPECT_EQ(m.tokens, (Tokens{60, 1}));
  EXPECT_EQ(m.match_len, 2);
}

TEST(NgramLookup, MostRecentOccurrenceWins) {
  const Tokens t{1, 2, 10, 11, 1, 2, 20, 21, 1, 2};
  DraftMatch m = ngram_lookup(t, 1, 2, 2);
  EXPECT_EQ(m.tokens, (Tokens{20, 21}));
  EXPECT_EQ(m.match_len, 2);
  m = ngram_lookup(t, 1, 3, 2);  // the longest match, "1 2", is shorter than max_ngram
  EXPECT_EQ(m.tokens, (Tokens{20, 21}));
  EXPECT_EQ(m.match_len, 2);
}

TEST(NgramLookup, MaxDraftsCaps) {
  const Tokens t{1, 2, 3, 4, 5, 6, 1, 2};
  EXPECT_EQ(ngram_lookup(t, 1, 2, 3).tokens, (Tokens{3, 4, 5}));
  EXPECT_EQ(ngram_lookup(t, 1, 2, 1).tokens, (Tokens{3}));
  EXPECT_TRUE(ngram_lookup(t, 1, 2, 0).tokens.empty());
  EXPECT_EQ(ngram_lookup(t, 1, 2, -1).match_len, 0);
}

TEST(NgramLookup, ContinuationStopsAtTheEnd) {
  const DraftMatch m = ngram_lookup(Tokens{5, 6, 7, 5}, 1, 2, 10);
  EXPECT_EQ(m.tokens, (Tokens{6, 7, 5}));
  EXPECT_EQ(m.match_len, 1);
}

// The earlier occurrence overlaps the suffix: its continuation runs through the suffix itself.
TEST(NgramLookup, RepeatingPatternProposesItsNextPeriod) {
  DraftMatch m = ngram_lookup(Tokens{9, 1, 2, 3, 1, 2, 3, 1}, 1, 3, 4);
  EXPECT_EQ(m.tokens, (Tokens{2, 3, 1}));
  EXPECT_EQ(m.match_len, 3);
  m = ngram_lookup(Tokens{1, 2, 1, 2, 1, 2}, 1, 4, 4);
  EXPECT_EQ(m.tokens, (Tokens{1, 2}));
  EXPECT_EQ(m.match_len, 4);
  m = ngram_lookup(Tokens{3, 3, 3, 3}, 1, 2, 5);
  EXPECT_EQ(m.tokens, (Tokens{3}));
  EXPECT_EQ(m.match_len, 2);
}

TEST(NgramLookup, NgramBounds) {
  const Tokens t{1, 2, 3, 9, 3};  // only the 1-gram "3" recurs
  EXPECT_TRUE(ngram_lookup(t, 2, 3, 4).tokens.empty());
  EXPECT_EQ(ngram_lookup(t, 1, 3, 4).tokens, (Tokens{9, 3}));
  EXPECT_EQ(ngram_lookup(t, 0, 3, 4).tokens, (Tokens{9, 3}));  // min_ngram below 1 counts as 1
  EXPECT_TRUE(ngram_lookup(t, 2, 1, 4).tokens.empty());          // max below min
  const DraftMatch capped = ngram_lookup(Tokens{1, 2, 3, 4, 8, 1, 2, 3, 4}, 1, 2, 2);
  EXPECT_EQ(capped.tokens, (Tokens{8, 1}));
  EXPECT_EQ(capped.match_len, 2);
}

TEST(NgramLookup, EmptyAndShortInputs) {
  EXPECT_TRUE(ngram_lookup(Tokens{}, 1, 3, 4).tokens.empty());
  EXPECT_TRUE(ngram_lookup(Tokens{5}, 1, 3, 4).tokens.empty());
  EXPECT_TRUE(ngram_lookup(Tokens{4, 5}, 1, 3, 4).tokens.empty());
  const DraftMatch m = ngram_lookup(Tokens{5, 5}, 1, 3, 4);
  EXPECT_EQ(m.tokens, (Tokens{5}));
  EXPECT_EQ(m.match_len, 1);
}

TEST(NgramLookup, AgreesWithTheDefinitionOnRandomSequences) {
  std::mt19937 rng(34);
  for (int trial = 0; trial < 3000; ++trial) {
    Tokens t(rng() % 40);
    const int32_t alphabet = 2 + int32_t(rng() % 5);
    for (int32_t& x : t) x = int32_t(rng() % alphabet);
    const int32_t min_ngram = int32_t(rng() % 3), max_ngram = int32_t(rng() % 6), drafts = int32_t(rng() % 6);
    const DraftMatch want = lookup_by_definition(t, min_ngram, max_ngram, drafts);
    const DraftMatch got = ngram_lookup(t, min_ngram, max_ngram, drafts);
    ASSERT_EQ(got.tokens, want.tokens) << "trial " << trial;
    ASSERT_EQ(got.match_len, want.match_len) << "trial " << trial;
  }
}

TEST(SuffixIndex, LearnsAnOutputAndProposesItsContinuation) {
  SuffixIndex index(1000, 4);
  EXPECT_TRUE(index.propose(Tokens{11, 12}, 1, 3, 0.5f).tokens.empty());
  index.add(Tokens{10, 11, 12, 13, 14, 15});
  EXPECT_EQ(index.num_tokens(), 6);
  DraftMatch m = index.propose(Tokens{99, 11, 12}, 1, 3, 0.5f);
  EXPECT_EQ(m.tokens, (Tokens{13, 14, 15}));
  EXPECT_EQ(m.match_len, 2);
  m = index.propose(Tokens{99, 11, 12}, 1, 10, 0.5f);  // the output ended after 15
  EXPECT_EQ(m.tokens, (Tokens{13, 14, 15}));
  EXPECT_TRUE(index.propose(Tokens{11, 12}, 1, 0, 0.5f).tokens.empty());
}

TEST(SuffixIndex, FrequencyDecidesBetweenContinuations) {
  SuffixIndex index(1000, 4);
  index.add(Tokens{1, 2, 3});
  index.add(Tokens{1, 2, 3});
  index.add(Tokens{1, 2, 4});
  EXPECT_EQ(index.propose(Tokens{1, 2}, 1, 1, 0.5f).tokens, (Tokens{3}));
  EXPECT_TRUE(index.propose(Tokens{1, 2}, 1, 1, 0.7f).tokens.empty());  // 3 has 2/3
  index.add(Tokens{1, 2, 4});
  index.add(Tokens{1, 2, 4});
  EXPECT_EQ(index.propose(Tokens{1, 2}, 1, 1, 0.5f).tokens, (Tokens{4}));
}

// "1" is always followed by 2 and "1 2" by 3 only two times in three: the drafts stop there when
// min_share asks for more.
TEST(SuffixIndex, MinShareStopsTheExtension) {
  SuffixIndex index(1000, 4);
  index.add(Tokens{1, 2, 3});
  index.add(Tokens{1, 2, 4});
  index.add(Tokens{1, 2, 3});
  DraftMatch m = index.propose(Tokens{1}, 1, 5, 0.6f);
  EXPECT_EQ(m.tokens, (Tokens{2, 3}));
  EXPECT_EQ(m.match_len, 1);
  m = index.propose(Tokens{1}, 1, 5, 0.7f);
  EXPECT_EQ(m.tokens, (Tokens{2}));
  EXPECT_EQ(m.match_len, 1);
}

TEST(SuffixIndex, MinMatchIsRespected) {
  SuffixIndex index(1000, 3);
  index.add(Tokens{1, 2, 3, 4});
  DraftMatch m = index.propose(Tokens{9, 3}, 1, 1, 0.5f);
  EXPECT_EQ(m.tokens, (Tokens{4}));
  EXPECT_EQ(m.match_len, 1);
  EXPECT_TRUE(index.propose(Tokens{9, 3}, 2, 1, 0.5f).tokens.empty());
  m = index.propose(Tokens{1, 2, 3}, 3, 1, 0.5f);
  EXPECT_EQ(m.tokens, (Tokens{4}));
  EXPECT_EQ(m.match_len, 3);
  EXPECT_TRUE(index.propose(Tokens{0, 1, 2, 3}, 4, 1, 0.5f).tokens.empty());  // deeper than max_depth
}

TEST(SuffixIndex, ForgetsTheOldestOutputsWhole) {
  SuffixIndex index(10, 3);
  index.add(Tokens{1, 2, 3, 4, 5});
  index.add(Tokens{6, 7, 8, 9});
  EXPECT_EQ(index.num_tokens(), 9);
  EXPECT_EQ(index.propose(Tokens{1, 2}, 1, 5, 0.5f).tokens, (Tokens{3, 4, 5}));

  index.add(Tokens{20, 21, 22});  // 12 tokens would not fit: the first output goes
  EXPECT_EQ(index.num_tokens(), 7);
  EXPECT_TRUE(index.propose(Tokens{1, 2}, 1, 5, 0.5f).tokens.empty());
  EXPECT_EQ(index.propose(Tokens{6, 7}, 1, 5, 0.5f).tokens, (Tokens{8, 9}));

  index.add(Tokens{1, 2, 3, 4, 5});  // back again, pushing out the second
  EXPECT_EQ(index.num_tokens(), 8);
  EXPECT_EQ(index.propose(Tokens{1, 2}, 1, 5, 0.5f).tokens, (Tokens{3, 4, 5}));
  EXPECT_TRUE(index.propose(Tokens{6, 7}, 1, 5, 0.5f).tokens.empty());
  EXPECT_EQ(index.propose(Tokens{20}, 1, 5, 0.5f).tokens, (Tokens{21, 22}));

  index.add(Tokens{30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41});  // keeps its last 10 tokens
  EXPECT_EQ(index.num_tokens(), 10);
  EXPECT_TRUE(index.propose(Tokens{20}, 1, 5, 0.5f).tokens.empty());
  EXPECT_TRUE(index.propose(Tokens{30}, 1, 5, 0.5f).tokens.empty());
  EXPECT_EQ(index.propose(Tokens{32}, 1, 2, 0.5f).tokens, (Tokens{33, 34}));
}

TEST(SuffixIndex, TiesGoToTheSmallerTokenWhateverTheOrder) {
  SuffixIndex first(1000, 2), second(1000, 2);
  first.add(Tokens{1, 9});
  first.add(Tokens{1, 5});
  second.add(Tokens{1, 5});
  second.add(Tokens{1, 9});
  EXPECT_EQ(first.propose(Tokens{1}, 1, 1, 0.5f).tokens, (Tokens{5}));
  EXPECT_EQ(second.propose(Tokens{1}, 1, 1, 0.5f).tokens, (Tokens{5}));
}

// After much adding and forgetting, the index answers exactly as a fresh one fed only the outputs it
// still remembers: forgetting removes what adding counted, no more, no less.
TEST(SuffixIndex, ForgettingLeavesNoTrace) {
  constexpr int64_t kMaxTokens = 60;
  std::mt19937 rng(7);
  auto random_tokens = [&](size_t size) {
    Tokens t(size);
    for (int32_t& x : t) x = int32_t(rng() % 4);
    return t;
  };
  SuffixIndex churned(kMaxTokens, 3);
  std::deque<Tokens> remembered;
  int64_t remembered_tokens = 0;
  for (int step = 0; step < 400; ++step) {
    const Tokens output = random_tokens(1 + rng() % 12);
    churned.add(output);
    while (remembered_tokens + int64_t(output.size()) > kMaxTokens) {
      remembered_tokens -= int64_t(remembered.front().size());
      remembered.pop_front();
    }
    remembered.push_back(output);
    remembered_tokens += int64_t(output.size());
    ASSERT_EQ(churned.num_tokens(), remembered_tokens);
    if (step % 20 != 0) continue;
    SuffixIndex fresh(kMaxTokens, 3);
    for (const Tokens& t : remembered) fresh.add(t);
    for (int query = 0; query < 50; ++query) {
      const Tokens context = random_tokens(1 + rng() % 4);
      const float share = float(rng() % 5) / 4;
      const DraftMatch want = fresh.propose(context, 1, 4, share);
      const DraftMatch got = churned.propose(context, 1, 4, share);
      ASSERT_EQ(got.tokens, want.tokens) << "step " << step;
      ASSERT_EQ(got.match_len, want.match_len) << "step " << step;
    }
  }
  // One output of tokens never seen before fills the index: nothing of the old ones may remain.
  Tokens unseen(kMaxTokens);
  for (int32_t i = 0; i < int32_t(kMaxTokens); ++i) unseen[size_t(i)] = 100 + i;
  churned.add(unseen);
  EXPECT_EQ(churned.num_tokens(), kMaxTokens);
  for (int32_t a = 0; a < 4; ++a) {
    for (int32_t b = 0; b < 4; ++b) EXPECT_TRUE(churned.propose(Tokens{a, b}, 1, 4, 0).tokens.empty());
  }
  EXPECT_EQ(churned.propose(Tokens{100}, 1, 2, 0).tokens, (Tokens{101, 102}));
}

}  // namespace
}  // namespace flashserve
