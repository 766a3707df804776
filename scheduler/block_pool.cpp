#include "scheduler/block_pool.h"

#include <stdexcept>
#include <string>

namespace flashserve {

BlockPool::BlockPool(int32_t num_blocks, bool enable_prefix_caching)
    : caching_(enable_prefix_caching) {
  if (num_blocks < 0) throw std::invalid_argument("block pool needs a non-negative number of blocks");
  ref_count_.assign(num_blocks, 0);
  prev_.assign(num_blocks, -1);
  next_.assign(num_blocks, -1);
  hash_of_.assign(num_blocks, std::nullopt);
  for (int32_t b = 0; b < num_blocks; ++b) push_back(b);
}

// Block ids come from callers' block tables; a bad one must fail loudly rather than index out of range.
static void check_block(int32_t block, int32_t num_blocks) {
  if (block < 0 || block >= num_blocks) {
    throw std::out_of_range("block " + std::to_string(block) + " outside pool of " +
                            std::to_string(num_blocks));
  }
}

std::optional<int32_t> BlockPool::allocate() {
  if (head_ < 0) return std::nullopt;
  const int32_t block = head_;
  unlink(block);
  uncache(block);  // its contents are about to be overwritten
  ref_count_[block] = 1;
  return block;
}

void BlockPool::free(int32_t block) {
  check_block(block, num_blocks());
  if (ref_count_[block] == 0) {
    throw std::logic_error("free of block " + std::to_string(block) + " with refcount 0");
  }
  if (--ref_count_[block] == 0) push_back(block);
}

std::optional<int32_t> BlockPool::lookup(BlockHash hash, const std::vector<int32_t>& tokens) const {
  if (!caching_) return std::nullopt;
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end() || it->second.tokens != tokens) return std::nullopt;
  return it->second.block;
}

void BlockPool::acquire(int32_t block) {
  check_block(block, num_blocks());
  if (ref_count_[block] == 0) unlink(block);
  ++ref_count_[block];
}

void BlockPool::cache(int32_t block, BlockHash hash, std::vector<int32_t> tokens) {
  check_block(block, num_blocks());
  if (!caching_ || by_hash_.count(hash) != 0) return;
  // A block holds one content; a second hash for it would leave the first pointing at wrong tokens.
  if (hash_of_[block]) throw std::logic_error("block " + std::to_string(block) + " is already cached");
  by_hash_.emplace(hash, CachedBlock{block, std::move(tokens)});
  hash_of_[block] = hash;
}

void BlockPool::unlink(int32_t block) {
  const int32_t p = prev_[block], n = next_[block];
  (p >= 0 ? next_[p] : head_) = n;
  (n >= 0 ? prev_[n] : tail_) = p;
  prev_[block] = next_[block] = -1;
  --num_free_;
}

void BlockPool::push_back(int32_t block) {
  prev_[block] = tail_;
  next_[block] = -1;
  (tail_ >= 0 ? next_[tail_] : head_) = block;
  tail_ = block;
  ++num_free_;
}

void BlockPool::uncache(int32_t block) {
  if (!hash_of_[block]) return;
  by_hash_.erase(*hash_of_[block]);
  hash_of_[block].reset();
}

}  // namespace flashserve
