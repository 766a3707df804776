#include "scheduler/kv_cache_manager.h"

// For XXH3_generateSecret (xxhash 0.8.1 lists it with the static-linking API).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

namespace flashserve {

// Parent of a sequence's first block, so block 0's hash is chained like every other block's.
static constexpr BlockHash kRootHash = 0x666c61736873727aULL;

// A secret drawn for each cache: block hashes cannot be predicted from outside the process, so a
// client cannot craft prompts whose blocks collide with another client's (with a fixed public seed
// it could; the class of issue behind vLLM's CVE-2025-25183).
static std::vector<uint8_t> random_hash_secret() {
  std::random_device rd;
  uint32_t seed_material[16];
  for (uint32_t& w : seed_material) w = rd();
  std::vector<uint8_t> secret(XXH3_SECRET_DEFAULT_SIZE);
  XXH3_generateSecret(secret.data(), secret.size(), seed_material, sizeof(seed_material));
  return secret;
}

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      pool_(num_blocks, enable_prefix_caching),
      hash_secret_(random_hash_secret()),
      hash_input_(sizeof(BlockHash) + sizeof(int32_t) * size_t(std::max(block_size, 0))) {
  if (block_size <= 0) throw std::invalid_argument("KV block size must be positive");
}

double KvCacheManager::usage() const {
  if (num_blocks() == 0) return 0.0;
  return double(pool_.num_used_blocks()) / double(num_blocks());
}

// Hashing the parent's hash with the tokens makes a block's hash depend on every token before it, so
// equal blocks after different prefixes never share KV (which depends on the whole prefix).
BlockHash KvCacheManager::hash_block(BlockHash parent, const int32_t* tokens) {
  std::memcpy(hash_input_.data(), &parent, sizeof(parent));
  std::memcpy(hash_input_.data() + sizeof(parent), tokens, sizeof(int32_t) * size_t(block_size_));
  return XXH3_64bits_withSecret(hash_input_.data(), hash_input_.size(), hash_secret_.data(), hash_secret_.size());
}

static std::vector<int32_t> block_tokens(const std::vector<int32_t>& tokens, int32_t index, int32_t block_size) {
  const auto begin = tokens.begin() + ptrdiff_t(index) * block_size;
  return std::vector<int32_t>(begin, begin + block_size);
}

int32_t KvCacheManager::acquire_cached_prefix(KvSequence& seq, const std::vector<int32_t>& tokens) {
  if (!seq.block_table.empty()) throw std::logic_error("cached prefix asked for a sequence that has blocks");
  if (!pool_.caching_enabled()) return 0;
  stats_.queried_tokens += int64_t(tokens.size());
  // The last token's logits are needed to sample, so it is always computed, never taken from cache.
  const int32_t max_blocks = tokens.empty() ? 0 : int32_t((tokens.size() - 1) / block_size_);
  BlockHash parent = kRootHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    const BlockHash hash = hash_block(parent, tokens.data() + ptrdiff_t(i) * block_size_);
    const std::optional<int32_t> block = pool_.lookup(hash, block_tokens(tokens, i, block_size_));
    if (!block) break;  // a later block's KV depends on this one, so the hit ends here
    pool_.acquire(*block);
    seq.block_table.push_back(*block);
    seq.block_hashes.push_back(hash);
    parent = hash;
  }
  seq.num_cached_tokens = int32_t(seq.block_table.size()) * block_size_;
  stats_.hit_tokens += seq.num_cached_tokens;
  return seq.num_cached_tokens;
}

bool KvCacheManager::allocate(KvSequence& seq, int32_t num_tokens) {
  const int32_t needed = blocks_for(num_tokens) - int32_t(seq.block_table.size());
  if (needed <= 0) return true;
  if (needed > pool_.num_free_blocks()) return false;  // checked up front so a failure changes nothing
  for (int32_t i = 0; i < needed; ++i) seq.block_table.push_back(*pool_.allocate());
  return true;
}

void KvCacheManager::cache_full_blocks(KvSequence& seq, const std::vector<int32_t>& tokens,
                                       int32_t num_computed_tokens) {
  if (num_computed_tokens < 0 || size_t(num_computed_tokens) > tokens.size()) {
    throw std::logic_error("more tokens computed than the sequence has");
  }
  if (!pool_.caching_enabled()) return;
  const int32_t num_full = num_computed_tokens / block_size_;
  if (size_t(num_full) > seq.block_table.size()) throw std::logic_error("computed tokens outside the block table");
  BlockHash parent = seq.block_hashes.empty() ? kRootHash : seq.block_hashes.back();
  for (int32_t i = int32_t(seq.block_hashes.size()); i < num_full; ++i) {
    const BlockHash hash = hash_block(parent, tokens.data() + ptrdiff_t(i) * block_size_);
    pool_.cache(seq.block_table[i], hash, block_tokens(tokens, i, block_size_));
    seq.block_hashes.push_back(hash);  // kept even if another block holds this hash: later blocks chain on it
    parent = hash;
  }
}

void KvCacheManager::free(KvSequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) pool_.free(*it);
  seq.block_table.clear();
  seq.block_hashes.clear();
  seq.num_cached_tokens = 0;
}

}  // namespace flashserve
