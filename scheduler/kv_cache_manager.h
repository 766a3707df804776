// Which KV blocks each sequence holds. Owns the BlockPool; hands out block tables, finds cached
// prefixes, and registers newly filled blocks in the prefix cache. Knows token ids, never tensors.
// A model's layers may form several KV groups (model/kv_groups.h), each with its own block table
// per sequence, all drawing on the one pool; a sliding-window group's blocks return to the pool
// (hash kept, so a later prompt may still hit them) once no query still to come can see them.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>
#include "scheduler/block_pool.h"

namespace flashserve {

// A sequence as the KV manager sees it. The scheduler's Request embeds one.
struct KvSequence {
  // [group][block index]; -1 where a sliding-window group has returned (or never took) the block.
  std::vector<std::vector<int32_t>> block_tables;
  std::vector<BlockHash> block_hashes;  // chained hashes of its full blocks registered so far
  int32_t num_cached_tokens = 0;        // tokens found in the prefix cache when it was admitted
  // The runner's copy of the tables (take_table_delta): its id, -1 before the first delta and
  // after free(); and per group how many entries it holds.
  int64_t copy_id = -1;
  std::vector<int32_t> num_copied;
};

// What a runner's copy of a sequence's tables lacks: per group, the entries to append; no groups
// at all when none gained any.
struct TableDelta {
  int64_t copy_id;
  std::vector<std::vector<int32_t>> new_blocks;
};

struct PrefixCacheStats {
  int64_t queried_tokens = 0;  // prompt tokens looked up
  int64_t hit_tokens = 0;      // of which found cached
};

class KvCacheManager {
 public:
  // group_windows: per KV group, 0 for full attention or its sliding window (ModelRunner's
  // kv_group_windows()).
  KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                 std::vector<int32_t> group_windows = {0});

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const;  // used / total blocks, 0..1
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  const BlockPool& pool() const { return pool_; }

  int32_t num_groups() const { return int32_t(windows_.size()); }
  // Blocks one group's table spans for n tokens.
  int32_t blocks_for(int32_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }
  // The most blocks a sequence reaching `num_tokens` tokens, computed at most `max_chunk` at a time,
  // holds at once over all groups: whether a request can ever fit the pool.
  int64_t peak_blocks(int64_t num_tokens, int32_t max_chunk) const;
  // The longest sequence whose peak_blocks fits the whole pool (at most `limit`).
  int32_t max_tokens_per_sequence(int32_t max_chunk, int32_t limit) const;

  // For a sequence with no blocks yet: takes references on the longest run of cached full blocks
  // that match `tokens` from the start, never covering the last token (its logits must be computed).
  // Returns the number of tokens covered (a multiple of block_size; 0 when caching is off).
  int32_t acquire_cached_prefix(KvSequence& seq, const std::vector<int32_t>& tokens);

  // For a step computing tokens num_computed_tokens .. num_tokens-1: first returns the blocks of
  // sliding-window groups that none of these tokens (nor any later one) can see, then grows every
  // group's table to hold `num_tokens` tokens. The growth is all-or-nothing: false (and no block
  // taken) if the pool has too few free blocks.
  bool allocate(KvSequence& seq, int32_t num_tokens, int32_t num_computed_tokens = 0);

  // After the first `num_computed_tokens` of `tokens` are in the cache: registers every newly full
  // block under its chained hash.
  void cache_full_blocks(KvSequence& seq, const std::vector<int32_t>& tokens, int32_t num_computed_tokens);

  // Returns all of seq's blocks (tail first, so a sequence's last blocks are evicted first) and
  // clears it.
  void free(KvSequence& seq);

  // A runner keeps its own copy of each running sequence's tables, so a step carries only what
  // changed. The entries added to seq's tables since its last delta: all of them under a fresh
  // copy id the first time and after each free(). Entries a sliding window has since returned
  // (-1 here) stay as they were in the copy: no query reads them again.
  TableDelta take_table_delta(KvSequence& seq);
  // Ids of copies whose sequence has been freed since the last call: the runner drops them.
  std::vector<int64_t> take_released_copies();

 private:
  BlockHash hash_block(BlockHash parent, const int32_t* tokens);
  // Index of the first block a query at `position` can see in `group`.
  int32_t first_visible_block(int32_t group, int32_t position) const;
  void free_invisible(KvSequence& seq, int32_t num_computed_tokens);
  int32_t cached_prefix_blocks(const std::vector<BlockHash>& hashes, const std::vector<int32_t>& tokens,
                               std::vector<std::vector<std::optional<int32_t>>>& found) const;

  int32_t block_size_;
  std::vector<int32_t> windows_;
  BlockPool pool_;
  PrefixCacheStats stats_;
  std::vector<uint8_t> hash_secret_;  // drawn per cache (see the .cpp)
  std::vector<uint8_t> hash_input_;   // parent hash + one block of tokens
  std::vector<int64_t> released_copies_;
};

}  // namespace flashserve
