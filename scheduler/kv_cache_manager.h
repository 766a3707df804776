// Which KV blocks each sequence holds. Owns the BlockPool; hands out block tables, finds cached
// prefixes, and registers newly filled blocks in the prefix cache. Knows token ids, never tensors.
#pragma once
#include <cstdint>
#include <vector>
#include "scheduler/block_pool.h"

namespace flashserve {

// A sequence as the KV manager sees it. The scheduler's Request embeds one.
struct KvSequence {
  std::vector<int32_t> block_table;
  std::vector<BlockHash> block_hashes;  // chained hashes of its full blocks registered so far
  int32_t num_cached_tokens = 0;        // tokens found in the prefix cache when it was admitted
};

struct PrefixCacheStats {
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of which found cached
};

class KvCacheManager {
 public:
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const;  // used / total blocks, 0..1
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  const BlockPool& pool() const { return pool_; }

  // Blocks a sequence of n tokens needs.
  int32_t blocks_for(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // For a sequence with no blocks yet: takes references on the longest run of cached full blocks
  // that match `tokens` from the start, never covering the last token (its logits must be computed).
  // Returns the number of tokens covered (a multiple of block_size; 0 when caching is off).
  int32_t acquire_cached_prefix(KvSequence& seq, const std::vector<int32_t>& tokens);

  // Grows seq's block table to hold `num_tokens` tokens. All-or-nothing: returns false (and changes
  // nothing) if the pool has too few free blocks.
  bool allocate(KvSequence& seq, int32_t num_tokens);

  // After the first `num_computed_tokens` of `tokens` are in the cache: registers every newly full
  // block under its chained hash.
  void cache_full_blocks(KvSequence& seq, const std::vector<int32_t>& tokens, int32_t num_computed_tokens);

  // Returns all of seq's blocks (tail first, so a sequence's last blocks are evicted first) and
  // clears it.
  void free(KvSequence& seq);

 private:
  BlockHash hash_block(BlockHash parent, const int32_t* tokens);

  int32_t block_size_;
  BlockPool pool_;
  PrefixCacheStats stats_;
  std::vector<uint8_t> hash_secret_;  // drawn per cache (see the .cpp)
  std::vector<uint8_t> hash_input_;   // parent hash + one block of tokens

};

}  // namespace flashserve
