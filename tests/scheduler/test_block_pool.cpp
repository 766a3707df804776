// BlockPool: refcounts, LRU free queue, content-hash cache. The property test drives the pool and a
// slow, obviously-correct shadow model with the same random operations and compares them after each.
#include "scheduler/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>

namespace flashserve {
namespace {

void expect_accounting(const BlockPool& pool) {
  int32_t zero = 0;
  for (int32_t b = 0; b < pool.num_blocks(); ++b) {
    ASSERT_GE(pool.ref_count(b), 0);
    zero += pool.ref_count(b) == 0;
  }
  EXPECT_EQ(pool.num_free_blocks(), zero);
  EXPECT_EQ(pool.num_free_blocks() + pool.num_used_blocks(), pool.num_blocks());
}

TEST(BlockPool, StartsWithAllBlocksFreeInOrder) {
  BlockPool pool(5, true);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  for (int32_t b = 0; b < 5; ++b) EXPECT_EQ(pool.allocate(), b);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.num_used_blocks(), 5);
  expect_accounting(pool);
}

TEST(BlockPool, EmptyPoolAllocatesNothing) {
  BlockPool pool(0, true);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_THROW(BlockPool(-1, true), std::invalid_argument);
}

TEST(BlockPool, DoubleFreeThrowsAndChangesNothing) {
  BlockPool pool(3, true);
  const int32_t b = *pool.allocate();
  pool.free(b);
  EXPECT_THROW(pool.free(b), std::logic_error);
  EXPECT_THROW(pool.free(2), std::logic_error);  // never allocated
  EXPECT_THROW(pool.free(3), std::out_of_range);
  EXPECT_EQ(pool.num_free_blocks(), 3);
  expect_accounting(pool);
}

TEST(BlockPool, SharedBlockReturnsToQueueOnLastFree) {
  BlockPool pool(2, true);
  const int32_t b = *pool.allocate();
  pool.acquire(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.free(b);
  EXPECT_EQ(pool.num_free_blocks(), 1);
  pool.free(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
}

TEST(BlockPool, EvictsLeastRecentlyFreedFirst) {
  BlockPool pool(4, true);
  for (int32_t i = 0; i < 4; ++i) pool.allocate();
  for (int32_t b : {2, 0, 3, 1}) pool.free(b);
  for (int32_t b : {2, 0, 3, 1}) EXPECT_EQ(pool.allocate(), b);
}

TEST(BlockPool, FreedBlockKeepsHashUntilHandedOutAgain) {
  BlockPool pool(2, true);
  const int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.cache(a, 42, {1, 2});
  pool.free(a);
  pool.free(b);
  EXPECT_EQ(pool.lookup(42, {1, 2}), a);  // freed but still cached
  EXPECT_EQ(pool.allocate(), a);          // least recently freed: its hash goes with it
  EXPECT_EQ(pool.lookup(42, {1, 2}), std::nullopt);
  EXPECT_EQ(pool.num_cached_blocks(), 0);
}

TEST(BlockPool, AcquiringCachedFreeBlockPullsItFromQueue) {
  BlockPool pool(3, true);
  for (int32_t i = 0; i < 3; ++i) pool.allocate();
  pool.cache(1, 7, {5});
  for (int32_t b : {0, 1, 2}) pool.free(b);
  const auto hit = pool.lookup(7, {5});
  ASSERT_EQ(hit, 1);
  pool.acquire(*hit);
  EXPECT_EQ(pool.ref_count(1), 1);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.lookup(7, {5}), 1);  // a block in use keeps its hash
}

TEST(BlockPool, HashCollisionWithOtherTokensMisses) {
  BlockPool pool(2, true);
  const int32_t b = *pool.allocate();
  pool.cache(b, 99, {1, 2, 3});
  EXPECT_EQ(pool.lookup(99, {4, 5, 6}), std::nullopt);
  EXPECT_EQ(pool.lookup(99, {1, 2, 3}), b);
  EXPECT_EQ(pool.lookup(98, {1, 2, 3}), std::nullopt);
}

TEST(BlockPool, TakenHashKeepsFirstBlock) {
  BlockPool pool(2, true);
  const int32_t a = *pool.allocate(), b = *pool.allocate();
  pool.cache(a, 5, {1});
  pool.cache(b, 5, {1});
  EXPECT_EQ(pool.lookup(5, {1}), a);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_THROW(pool.cache(a, 6, {2}), std::logic_error);  // one block, one content
}

TEST(BlockPool, CachingDisabledNeverHits) {
  BlockPool pool(2, false);
  const int32_t b = *pool.allocate();
  pool.cache(b, 1, {1});
  EXPECT_FALSE(pool.caching_enabled());
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  EXPECT_EQ(pool.lookup(1, {1}), std::nullopt);
}

// Obviously-correct O(n) model of the pool: a list for the free queue, maps for the cache.
struct ShadowPool {
  std::vector<int32_t> ref;
  std::list<int32_t> free_queue;
  std::map<BlockHash, std::pair<int32_t, std::vector<int32_t>>> cache;

  explicit ShadowPool(int32_t n) : ref(n, 0) {
    for (int32_t b = 0; b < n; ++b) free_queue.push_back(b);
  }
  void drop_hash_of(int32_t block) {
    for (auto it = cache.begin(); it != cache.end(); ++it) {
      if (it->second.first == block) { cache.erase(it); return; }
    }
  }
  bool has_hash(int32_t block) const {
    return std::any_of(cache.begin(), cache.end(), [&](const auto& e) { return e.second.first == block; });
  }
  std::optional<int32_t> allocate() {
    if (free_queue.empty()) return std::nullopt;
    const int32_t b = free_queue.front();
    free_queue.pop_front();
    drop_hash_of(b);
    ref[b] = 1;
    return b;
  }
  void free(int32_t b) {
    if (--ref[b] == 0) free_queue.push_back(b);
  }
  void acquire(int32_t b) {
    if (ref[b]++ == 0) free_queue.remove(b);
  }
};

TEST(BlockPool, RandomOpsMatchShadowModel) {
  constexpr int32_t kBlocks = 24;
  BlockPool pool(kBlocks, true);
  ShadowPool shadow(kBlocks);
  std::mt19937 rng(1234);
  std::vector<int32_t> held;  // one entry per reference taken
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto content = [&] { return std::vector<int32_t>{int32_t(pick(4)), int32_t(pick(4))}; };
  int64_t hits = 0, evictions = 0, throws = 0;

  for (int step = 0; step < 20000; ++step) {
    const size_t op = pick(5);
    if (op == 0 || (op == 1 && held.empty())) {
      const size_t cached_before = shadow.cache.size();
      const auto got = pool.allocate();
      ASSERT_EQ(got, shadow.allocate());
      if (got) held.push_back(*got);
      evictions += shadow.cache.size() < cached_before;
    } else if (op == 1) {
      const size_t i = pick(held.size());
      pool.free(held[i]);
      shadow.free(held[i]);
      held[i] = held.back();
      held.pop_back();
    } else if (op == 2) {  // small hash space so lookups hit, collide and miss
      const BlockHash h = pick(12);
      const auto tokens = content();
      const auto it = shadow.cache.find(h);
      const bool expect_hit = it != shadow.cache.end() && it->second.second == tokens;
      const auto got = pool.lookup(h, tokens);
      ASSERT_EQ(got, expect_hit ? std::optional<int32_t>(it->second.first) : std::nullopt);
      if (got) {
        pool.acquire(*got);
        shadow.acquire(*got);
        held.push_back(*got);
        ++hits;
      }
    } else if (op == 3 && !held.empty()) {
      const int32_t b = held[pick(held.size())];
      const BlockHash h = pick(12);
      const auto tokens = content();
      if (shadow.cache.count(h) != 0) {
        pool.cache(b, h, tokens);  // a taken hash keeps its first block
      } else if (shadow.has_hash(b)) {
        EXPECT_THROW(pool.cache(b, h, tokens), std::logic_error);
      } else {
        pool.cache(b, h, tokens);
        shadow.cache.emplace(h, std::make_pair(b, tokens));
      }
    } else if (op == 4) {
      const int32_t b = int32_t(pick(kBlocks));
      if (shadow.ref[b] == 0) {
        EXPECT_THROW(pool.free(b), std::logic_error);
        ++throws;
      }
    }
    for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(pool.ref_count(b), shadow.ref[b]) << "step " << step;
    ASSERT_EQ(pool.num_free_blocks(), int32_t(shadow.free_queue.size()));
    ASSERT_EQ(pool.num_cached_blocks(), int32_t(shadow.cache.size()));
    ASSERT_EQ(pool.num_used_blocks(), kBlocks - int32_t(shadow.free_queue.size()));
    ASSERT_EQ(int32_t(held.size()), std::accumulate(shadow.ref.begin(), shadow.ref.end(), 0));
  }
  EXPECT_GT(hits, 100);  // the run exercised every path
  EXPECT_GT(evictions, 100);
  EXPECT_GT(throws, 100);

  for (int32_t b : held) pool.free(b);
  EXPECT_EQ(pool.num_free_blocks(), kBlocks);
  expect_accounting(pool);
  // Everything is free again, in the shadow's LRU order.
  for (int32_t b : held) shadow.free(b);
  for (int32_t b : shadow.free_queue) EXPECT_EQ(pool.allocate(), b);
}

}  // namespace
}  // namespace flashserve
