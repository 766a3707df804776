// A fixed pool of KV blocks with reference counts and a cache of full blocks keyed by content hash.
// Free blocks sit in one LRU queue (intrusive doubly-linked list, O(1) removal from the middle when a
// cached block is hit again); a freed block keeps its hash until it is handed out again, so a later
// request with the same prefix can take it back.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

namespace flashserve {

using BlockHash = uint64_t;

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_prefix_caching);

  int32_t num_blocks() const { return int32_t(ref_count_.size()); }
  // Blocks with refcount 0 (cached or not): what allocate() can hand out.
  int32_t num_free_blocks() const { return num_free_; }
  int32_t num_used_blocks() const { return num_blocks() - num_free_; }

  // Takes the least recently freed block (dropping its cached hash), refcount 1; nullopt if none.
  std::optional<int32_t> allocate();
  // Drops one reference; at 0 the block joins the free queue's tail (most recently freed), hash kept.
  // Throws std::logic_error on a block with refcount 0 (double free).
  void free(int32_t block);

  // Prefix cache. lookup() finds a block whose content hash and tokens match; acquire() then takes a
  // reference on it (pulling it out of the free queue if its refcount was 0).
  std::optional<int32_t> lookup(BlockHash hash, const std::vector<int32_t>& tokens) const;
  void acquire(int32_t block);
  // Registers a full block's hash and tokens (no-op when caching is off or the hash is taken).
  void cache(int32_t block, BlockHash hash, std::vector<int32_t> tokens);

  int32_t ref_count(int32_t block) const { return ref_count_[block]; }
  bool caching_enabled() const { return caching_; }
  int32_t num_cached_blocks() const { return int32_t(by_hash_.size()); }

 private:
  void unlink(int32_t block);
  void push_back(int32_t block);
  void uncache(int32_t block);

  bool caching_;
  std::vector<int32_t> ref_count_;
  std::vector<int32_t> prev_, next_;  // free queue links; -1 ends
  int32_t head_ = -1, tail_ = -1, num_free_ = 0;
  struct CachedBlock {
    int32_t block;
    std::vector<int32_t> tokens;  // checked on lookup: a hash match alone is not trusted
  };
  std::unordered_map<BlockHash, CachedBlock> by_hash_;
  std::vector<std::optional<BlockHash>> hash_of_;  // [block]
};

}  // namespace flashserve
