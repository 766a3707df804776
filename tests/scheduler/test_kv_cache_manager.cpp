// KvCacheManager: block tables, chained prefix hashing, prefix hits, all-or-nothing growth. The
// simulation at the end runs many overlapping sequences against a shadow of what each block holds.
#include "scheduler/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

namespace flashserve {
namespace {

constexpr int32_t kBlockSize = 4;

// The one group's table of a model without sliding-window layers (empty once freed).
const std::vector<int32_t>& table(const KvSequence& s) {
  static const std::vector<int32_t> none;
  return s.block_tables.empty() ? none : s.block_tables[0];
}

std::vector<int32_t> iota_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Admits a prompt, "computes" all of it and registers its full blocks, as the scheduler would.
int32_t admit_and_compute(KvCacheManager& kv, KvSequence& seq, const std::vector<int32_t>& tokens) {
  const int32_t hit = kv.acquire_cached_prefix(seq, tokens);
  EXPECT_TRUE(kv.allocate(seq, int32_t(tokens.size())));
  kv.cache_full_blocks(seq, tokens, int32_t(tokens.size()));
  return hit;
}

TEST(KvCacheManager, HashChainsOnParent) {
  KvCacheManager kv(8, kBlockSize, true);
  const auto shared = iota_tokens(4, 100);
  KvSequence a, b, c;
  admit_and_compute(kv, a, concat(iota_tokens(4, 0), shared));
  admit_and_compute(kv, b, concat(iota_tokens(4, 50), shared));
  admit_and_compute(kv, c, concat(shared, shared));
  ASSERT_EQ(a.block_hashes.size(), 2u);
  ASSERT_EQ(b.block_hashes.size(), 2u);
  EXPECT_NE(a.block_hashes[1], b.block_hashes[1]);  // same tokens, different parents
  EXPECT_NE(c.block_hashes[0], c.block_hashes[1]);  // same tokens, root vs chained parent
  EXPECT_EQ(kv.pool().num_cached_blocks(), 6);
}

// Block hashes are keyed with a secret drawn per cache (so per process): equal tokens hash alike
// within one cache, but nobody outside can predict a hash and craft a colliding prompt.
TEST(KvCacheManager, HashesAreKeyedPerCache) {
  KvCacheManager one(8, kBlockSize, true), other(8, kBlockSize, true);
  KvSequence a, b;
  admit_and_compute(one, a, iota_tokens(9, 0));
  admit_and_compute(other, b, iota_tokens(9, 0));
  ASSERT_EQ(a.block_hashes.size(), 2u);
  ASSERT_EQ(b.block_hashes.size(), 2u);
  EXPECT_NE(a.block_hashes[0], b.block_hashes[0]);
  EXPECT_NE(a.block_hashes[1], b.block_hashes[1]);
}

TEST(KvCacheManager, SamePrefixGivesSameHashes) {
  KvCacheManager kv(8, kBlockSize, true);
  KvSequence a, b;
  admit_and_compute(kv, a, iota_tokens(9, 0));
  kv.allocate(b, 9);  // computed separately (no lookup): the hash is taken, its blocks stay uncached
  kv.cache_full_blocks(b, iota_tokens(9, 0), 9);
  EXPECT_EQ(a.block_hashes, b.block_hashes);
  EXPECT_EQ(kv.pool().num_cached_blocks(), 2);
}

TEST(KvCacheManager, HitAfterRequestFinished) {
  KvCacheManager kv(8, kBlockSize, true);
  const auto prompt = iota_tokens(3 * kBlockSize + 1, 0);
  KvSequence a;
  admit_and_compute(kv, a, prompt);
  const auto a_table = table(a);
  kv.free(a);
  EXPECT_TRUE(table(a).empty() && a.block_hashes.empty());
  EXPECT_EQ(kv.num_free_blocks(), 8);

  KvSequence b;
  EXPECT_EQ(kv.acquire_cached_prefix(b, prompt), 3 * kBlockSize);
  EXPECT_EQ(b.num_cached_tokens, 3 * kBlockSize);
  EXPECT_EQ(table(b), std::vector<int32_t>(a_table.begin(), a_table.begin() + 3));
  EXPECT_EQ(b.block_hashes.size(), 3u);
  EXPECT_EQ(kv.num_free_blocks(), 5);
  EXPECT_EQ(kv.prefix_stats().queried_tokens, 2 * int64_t(prompt.size()));
  EXPECT_EQ(kv.prefix_stats().hit_tokens, 3 * kBlockSize);
  // The hit hashes let the rest chain on: finishing the prompt caches the same hashes as before.
  ASSERT_TRUE(kv.allocate(b, int32_t(prompt.size())));
  kv.cache_full_blocks(b, prompt, int32_t(prompt.size()));
  EXPECT_EQ(table(b).size(), 4u);
  EXPECT_EQ(kv.pool().num_cached_blocks(), 3);
}

TEST(KvCacheManager, MissAfterEvictionUnderPressure) {
  KvCacheManager kv(6, kBlockSize, true);
  const auto prompt = iota_tokens(3 * kBlockSize + 1, 0);
  KvSequence a, filler, b;
  admit_and_compute(kv, a, prompt);
  kv.free(a);
  ASSERT_TRUE(kv.allocate(filler, 6 * kBlockSize));  // takes every block, evicting all cached ones
  EXPECT_EQ(kv.pool().num_cached_blocks(), 0);
  kv.free(filler);
  EXPECT_EQ(kv.acquire_cached_prefix(b, prompt), 0);
  EXPECT_TRUE(table(b).empty());
}

TEST(KvCacheManager, TailBlocksAreEvictedFirst) {
  KvCacheManager kv(6, kBlockSize, true);
  const auto prompt = iota_tokens(3 * kBlockSize + 1, 0);
  KvSequence a, filler, b;
  admit_and_compute(kv, a, prompt);  // blocks 0..3; 4 and 5 stay free ahead of them
  kv.free(a);
  ASSERT_TRUE(kv.allocate(filler, 4 * kBlockSize));  // blocks 4, 5, then a's last two
  EXPECT_EQ(kv.acquire_cached_prefix(b, prompt), 2 * kBlockSize);
}

TEST(KvCacheManager, HitStopsAtFirstMismatch) {
  KvCacheManager kv(10, kBlockSize, true);
  const auto prompt = iota_tokens(4 * kBlockSize, 0);
  KvSequence a, b;
  admit_and_compute(kv, a, prompt);
  auto other = prompt;
  other[kBlockSize + 1] = -7;  // block 1 differs; block 2 is equal but its parent is not
  EXPECT_EQ(kv.acquire_cached_prefix(b, other), kBlockSize);
}

TEST(KvCacheManager, HitNeverCoversLastToken) {
  KvCacheManager kv(10, kBlockSize, true);
  const auto prompt = iota_tokens(3 * kBlockSize, 0);
  KvSequence a;
  admit_and_compute(kv, a, prompt);
  for (int32_t len : {0, 1, kBlockSize, kBlockSize + 1, 2 * kBlockSize, 3 * kBlockSize}) {
    KvSequence b;
    const std::vector<int32_t> tokens(prompt.begin(), prompt.begin() + len);
    const int32_t expected = len == 0 ? 0 : (len - 1) / kBlockSize * kBlockSize;
    EXPECT_EQ(kv.acquire_cached_prefix(b, tokens), expected) << "len " << len;
    kv.free(b);
  }
  KvSequence longer;
  EXPECT_EQ(kv.acquire_cached_prefix(longer, concat(prompt, {1})), 3 * kBlockSize);
}

TEST(KvCacheManager, SharedBlocksAreRefcountedPerSequence) {
  KvCacheManager kv(10, kBlockSize, true);
  const auto prompt = iota_tokens(2 * kBlockSize + 2, 0);
  KvSequence a, b;
  admit_and_compute(kv, a, prompt);
  EXPECT_EQ(admit_and_compute(kv, b, prompt), 2 * kBlockSize);
  for (int32_t i = 0; i < 2; ++i) EXPECT_EQ(kv.pool().ref_count(table(b)[i]), 2);
  EXPECT_NE(table(a)[2], table(b)[2]);  // the partial last block is private
  EXPECT_EQ(kv.num_free_blocks(), 6);
  kv.free(a);
  for (int32_t i = 0; i < 2; ++i) EXPECT_EQ(kv.pool().ref_count(table(b)[i]), 1);
  kv.free(b);
  EXPECT_EQ(kv.num_free_blocks(), 10);
}

TEST(KvCacheManager, CachingDisabled) {
  KvCacheManager kv(8, kBlockSize, false);
  const auto prompt = iota_tokens(3 * kBlockSize + 1, 0);
  KvSequence a, b;
  EXPECT_EQ(admit_and_compute(kv, a, prompt), 0);
  EXPECT_TRUE(a.block_hashes.empty());
  kv.free(a);
  EXPECT_EQ(admit_and_compute(kv, b, prompt), 0);
  EXPECT_EQ(kv.pool().num_cached_blocks(), 0);
  EXPECT_EQ(kv.prefix_stats().queried_tokens, 0);  // nothing is looked up when caching is off
}

TEST(KvCacheManager, AllocateIsAllOrNothing) {
  KvCacheManager kv(4, kBlockSize, true);
  KvSequence a, b;
  ASSERT_TRUE(kv.allocate(a, 3 * kBlockSize - 1));
  EXPECT_TRUE(kv.allocate(a, 3 * kBlockSize));  // still fits in its last block
  EXPECT_EQ(table(a).size(), 3u);
  EXPECT_FALSE(kv.allocate(b, kBlockSize + 1));  // needs 2, 1 free
  EXPECT_TRUE(table(b).empty());
  EXPECT_EQ(kv.num_free_blocks(), 1);
  EXPECT_FALSE(kv.allocate(a, 5 * kBlockSize));
  EXPECT_EQ(table(a).size(), 3u);
  EXPECT_TRUE(kv.allocate(a, 4 * kBlockSize));
  EXPECT_DOUBLE_EQ(kv.usage(), 1.0);
  kv.free(a);
  EXPECT_DOUBLE_EQ(kv.usage(), 0.0);
}

int32_t held(const std::vector<int32_t>& table) {
  return int32_t(std::count_if(table.begin(), table.end(), [](int32_t b) { return b >= 0; }));
}

// A full-attention group and one with a window of 8 positions: decoding token by token, the
// windowed group holds only the blocks its next query can see; the rest are back in the pool.
TEST(KvCacheManager, SlidingWindowGroupReturnsBlocksOutOfSight) {
  KvCacheManager kv(64, kBlockSize, false, {0, 8});
  KvSequence s;
  for (int32_t n = 0; n < 40; ++n) {
    ASSERT_TRUE(kv.allocate(s, n + 1, n));
    ASSERT_EQ(s.block_tables.size(), 2u);
    EXPECT_EQ(held(s.block_tables[0]), kv.blocks_for(n + 1));
    // Positions n - 7 .. n, and no block wholly before n - 7.
    const int32_t first = std::max(0, n - 7) / kBlockSize;
    EXPECT_EQ(held(s.block_tables[1]), kv.blocks_for(n + 1) - first) << "at " << n;
    for (int32_t i = 0; i < first; ++i) EXPECT_EQ(s.block_tables[1][size_t(i)], -1);
    EXPECT_EQ(kv.num_free_blocks(), 64 - held(s.block_tables[0]) - held(s.block_tables[1]));
  }
  kv.free(s);
  EXPECT_EQ(kv.num_free_blocks(), 64);
}

// A windowed group's prefix hit needs only the blocks the first computed token can see: here the
// earlier ones have been handed out again, and the hit still covers the prompt.
TEST(KvCacheManager, WindowedPrefixHitNeedsOnlyTheWindow) {
  KvCacheManager kv(6, kBlockSize, true, {8});
  const auto prompt = iota_tokens(33, 500);
  KvSequence a, b;
  for (int32_t n = 0; n < 33; n += kBlockSize) {
    const int32_t end = std::min(n + kBlockSize, 33);
    ASSERT_TRUE(kv.allocate(a, end, n));
    kv.cache_full_blocks(a, prompt, end);
  }
  kv.free(a);
  EXPECT_LT(kv.pool().num_cached_blocks(), 8);  // blocks 0.. were reused for later positions
  EXPECT_EQ(kv.acquire_cached_prefix(b, prompt), 32);
  ASSERT_EQ(b.block_tables[0].size(), 8u);
  for (int32_t i = 0; i < 6; ++i) EXPECT_EQ(b.block_tables[0][size_t(i)], -1);  // position 32 sees 25..32
  EXPECT_GE(b.block_tables[0][6], 0);
  EXPECT_GE(b.block_tables[0][7], 0);
  ASSERT_TRUE(kv.allocate(b, 33, 32));

  // With a full-attention group beside it, that group takes every block of the hit back.
  KvCacheManager hybrid(20, kBlockSize, true, {0, 8});
  KvSequence c, d;
  ASSERT_TRUE(hybrid.allocate(c, 33, 0));
  hybrid.cache_full_blocks(c, prompt, 33);
  hybrid.free(c);
  EXPECT_EQ(hybrid.acquire_cached_prefix(d, prompt), 32);
  EXPECT_EQ(held(d.block_tables[0]), 8);
  EXPECT_EQ(held(d.block_tables[1]), 2);
  EXPECT_EQ(hybrid.num_free_blocks(), 20 - 10);
}

// A runner's copy of the tables, grown by each delta, stays equal to the tables in every entry a
// query can still read; a freed sequence's copy is released and the next delta starts a new one.
TEST(KvCacheManager, TableDeltasRebuildTheTables) {
  KvCacheManager kv(64, kBlockSize, true, {0, 8});
  KvSequence s;
  std::vector<std::vector<int32_t>> copy;
  ASSERT_TRUE(kv.allocate(s, 10, 0));
  TableDelta first = kv.take_table_delta(s);
  EXPECT_EQ(first.new_blocks, s.block_tables);  // all of it, the first time
  copy = first.new_blocks;
  for (int32_t n = 10; n < 40; ++n) {
    ASSERT_TRUE(kv.allocate(s, n + 1, n));
    const TableDelta d = kv.take_table_delta(s);
    EXPECT_EQ(d.copy_id, first.copy_id);
    if (n % kBlockSize != 0) EXPECT_TRUE(d.new_blocks.empty()) << "at " << n;  // no block added
    for (size_t g = 0; g < d.new_blocks.size(); ++g) copy[g].insert(copy[g].end(), d.new_blocks[g].begin(), d.new_blocks[g].end());
    ASSERT_EQ(copy[0], s.block_tables[0]);
    ASSERT_EQ(copy[1].size(), s.block_tables[1].size());
    for (size_t i = size_t(std::max(0, n - 7) / kBlockSize); i < copy[1].size(); ++i) {
      EXPECT_EQ(copy[1][i], s.block_tables[1][i]) << "at " << n;  // the windowed group's visible part
    }
  }
  EXPECT_TRUE(kv.take_released_copies().empty());
  kv.free(s);
  EXPECT_EQ(kv.take_released_copies(), std::vector<int64_t>{first.copy_id});
  EXPECT_TRUE(kv.take_released_copies().empty());  // each release is reported once
  ASSERT_TRUE(kv.allocate(s, 5, 0));
  const TableDelta again = kv.take_table_delta(s);
  EXPECT_NE(again.copy_id, first.copy_id);
  EXPECT_EQ(again.new_blocks, s.block_tables);
  KvSequence never_copied;
  ASSERT_TRUE(kv.allocate(never_copied, 5, 0));
  kv.free(never_copied);
  EXPECT_TRUE(kv.take_released_copies().empty());  // no copy, nothing to release
}

// How big a sequence can grow: the full group needs every block, the windowed one the window plus
// one step's tokens.
TEST(KvCacheManager, PeakBlocksCountWindowsOnce) {
  KvCacheManager kv(10, kBlockSize, true, {0, 8});
  EXPECT_EQ(kv.peak_blocks(40, 4), 10 + 4);
  EXPECT_EQ(kv.peak_blocks(8, 4), 2 + 2);
  EXPECT_EQ(kv.max_tokens_per_sequence(4, 1000), 24);  // 6 + 4 blocks
  EXPECT_EQ(KvCacheManager(10, kBlockSize, true).max_tokens_per_sequence(4, 1000), 40);
  EXPECT_EQ(KvCacheManager(10, kBlockSize, true, {8}).max_tokens_per_sequence(4, 1000), 1000);
}

TEST(KvCacheManager, RejectsMisuse) {
  KvCacheManager kv(4, kBlockSize, true);
  KvSequence a;
  ASSERT_TRUE(kv.allocate(a, kBlockSize));
  EXPECT_THROW(kv.acquire_cached_prefix(a, iota_tokens(8, 0)), std::logic_error);
  EXPECT_THROW(kv.cache_full_blocks(a, iota_tokens(8, 0), 9), std::logic_error);
  EXPECT_THROW(kv.cache_full_blocks(a, iota_tokens(8, 0), 8), std::logic_error);  // 2 blocks, 1 held
  EXPECT_THROW(KvCacheManager(4, 0, true), std::invalid_argument);
}

// --- Randomized simulation -------------------------------------------------------------------

// What the KV at a position depends on: the token there and every token before it.
using Fingerprint = uint64_t;
std::vector<Fingerprint> fingerprints(const std::vector<int32_t>& tokens) {
  std::vector<Fingerprint> f(tokens.size());
  Fingerprint h = 1469598103934665603ULL;
  for (size_t i = 0; i < tokens.size(); ++i) f[i] = h = (h ^ uint64_t(tokens[i] + 1)) * 1099511628211ULL;
  return f;
}

struct SimSeq {
  std::vector<int32_t> tokens;
  KvSequence kv;
  int32_t num_computed_tokens = 0;
};

class KvSimulation {
 public:
  KvSimulation() : kv_(kBlocks, kBlockSize, true), written_(kBlocks, std::vector<Fingerprint>(kBlockSize, 0)) {
    for (int f = 0; f < 4; ++f) families_.push_back(random_tokens(pick(0, 40)));
  }

  void run(int steps) {
    for (int step = 0; step < steps; ++step) {
      const int op = pick(0, 9);
      if (op < 3 && live_.size() < 8) admit();
      else if (op < 9 && !live_.empty()) advance(pick(0, int(live_.size()) - 1));
      else if (!live_.empty()) finish(pick(0, int(live_.size()) - 1));
      check_invariants();
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (!live_.empty()) finish(0);
    EXPECT_EQ(kv_.num_free_blocks(), kBlocks);
  }

  int64_t hits = 0, rejections = 0, preemptions = 0, shared_seen = 0;

 private:
  static constexpr int32_t kBlocks = 40;

  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  std::vector<int32_t> random_tokens(int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = pick(0, 5);
    return t;
  }

  void admit() {
    const auto& family = families_[pick(0, int(families_.size()) - 1)];
    SimSeq s;
    s.tokens.assign(family.begin(), family.begin() + pick(0, int(family.size())));
    s.tokens = concat(s.tokens, random_tokens(pick(1, 12)));
    const int32_t len = int32_t(s.tokens.size());
    const int32_t hit = kv_.acquire_cached_prefix(s.kv, s.tokens);
    ASSERT_EQ(hit % kBlockSize, 0);
    ASSERT_LE(hit, (len - 1) / kBlockSize * kBlockSize);
    ASSERT_EQ(int32_t(table(s.kv).size()) * kBlockSize, hit);
    expect_holds(s, hit);  // a hit must hand back blocks whose KV is exactly this prefix's
    hits += hit > 0;
    s.num_computed_tokens = hit;
    if (!kv_.allocate(s.kv, len)) {
      ASSERT_EQ(int32_t(table(s.kv).size()) * kBlockSize, hit);  // failure changed nothing
      kv_.free(s.kv);
      ++rejections;
      return;
    }
    live_.push_back(std::move(s));
  }

  // One engine step for a sequence: a prefill chunk, or a sampled token that needs room.
  void advance(int i) {
    SimSeq& s = live_[i];
    if (s.num_computed_tokens == int32_t(s.tokens.size())) {
      if (s.tokens.size() > 60) return finish(i);
      s.tokens.push_back(pick(0, 5));
      if (!kv_.allocate(s.kv, int32_t(s.tokens.size()))) {
        ++preemptions;
        return finish(i);
      }
      return;
    }
    const int32_t end = std::min<int32_t>(s.tokens.size(), s.num_computed_tokens + pick(1, 8));
    write_kv(s, end);
    kv_.cache_full_blocks(s.kv, s.tokens, end);
    s.num_computed_tokens = end;
  }

  void write_kv(const SimSeq& s, int32_t end) {
    const auto f = fingerprints(s.tokens);
    for (int32_t p = s.num_computed_tokens; p < end; ++p) {
      const int32_t block = table(s.kv)[p / kBlockSize];
      ASSERT_EQ(kv_.pool().ref_count(block), 1) << "write into a shared block";
      written_[block][p % kBlockSize] = f[p];
    }
  }

  void expect_holds(const SimSeq& s, int32_t num_tokens) {
    const auto f = fingerprints(s.tokens);
    for (int32_t p = 0; p < num_tokens; ++p) {
      ASSERT_EQ(written_[table(s.kv)[p / kBlockSize]][p % kBlockSize], f[p]) << "position " << p;
    }
  }

  void finish(int i) {
    kv_.free(live_[i].kv);
    EXPECT_TRUE(table(live_[i].kv).empty() && live_[i].kv.block_hashes.empty());
    live_.erase(live_.begin() + i);
  }

  // Refcounts equal the number of live sequences holding each block; accounting is exact.
  void check_invariants() {
    std::vector<int32_t> holders(kBlocks, 0);
    for (const auto& s : live_) {
      const std::set<int32_t> unique(table(s.kv).begin(), table(s.kv).end());
      ASSERT_EQ(unique.size(), table(s.kv).size()) << "block twice in one table";
      ASSERT_EQ(table(s.kv).size(), size_t(kv_.blocks_for(int32_t(s.tokens.size()))));
      ASSERT_LE(s.kv.block_hashes.size(), size_t(s.num_computed_tokens / kBlockSize));
      expect_holds(s, s.num_computed_tokens);
      for (int32_t b : table(s.kv)) ++holders[b];
    }
    int32_t free_blocks = 0;
    for (int32_t b = 0; b < kBlocks; ++b) {
      ASSERT_EQ(kv_.pool().ref_count(b), holders[b]) << "block " << b;
      free_blocks += holders[b] == 0;
      shared_seen += holders[b] >= 2;
    }
    ASSERT_EQ(kv_.num_free_blocks(), free_blocks);
    ASSERT_EQ(kv_.num_free_blocks() + kv_.pool().num_used_blocks(), kBlocks);
  }

  KvCacheManager kv_;
  std::mt19937 rng_{2024};
  std::vector<std::vector<int32_t>> families_;
  std::vector<SimSeq> live_;
  std::vector<std::vector<Fingerprint>> written_;  // [block][offset]: whose KV the block holds
};

TEST(KvCacheManager, RandomizedSimulationKeepsInvariants) {
  KvSimulation sim;
  sim.run(20000);
  // The run must have exercised hits, sharing and pressure, or the invariants proved little.
  EXPECT_GT(sim.hits, 100);
  EXPECT_GT(sim.shared_seen, 100);
  EXPECT_GT(sim.rejections + sim.preemptions, 10);
}

}  // namespace
}  // namespace flashserve
