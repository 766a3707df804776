#include "scheduler/kv_cache_manager.h"

// For XXH3_generateSecret (xxhash 0.8.1 lists it with the static-linking API).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>

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

// A group's key for a block in the pool's prefix cache: the same tokens hold different layers' KV
// in each group. Group 0 keeps the chained hash itself.
static BlockHash group_key(BlockHash hash, int32_t group) { return hash ^ (uint64_t(group) * 0x9e3779b97f4a7c15ULL); }

KvCacheManager::KvCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                               std::vector<int32_t> group_windows)
    : block_size_(block_size),
      windows_(std::move(group_windows)),
      pool_(num_blocks, enable_prefix_caching),
      hash_secret_(random_hash_secret()),
      hash_input_(sizeof(BlockHash) + sizeof(int32_t) * size_t(std::max(block_size, 0))) {
  if (block_size <= 0) throw std::invalid_argument("KV block size must be positive");
  if (windows_.empty()) throw std::invalid_argument("a KV cache needs at least one group of layers");
  for (int32_t w : windows_) {
    if (w < 0) throw std::invalid_argument("a sliding window must not be negative");
  }
}

double KvCacheManager::usage() const {
  if (num_blocks() == 0) return 0.0;
  return double(pool_.num_used_blocks()) / double(num_blocks());
}

int64_t KvCacheManager::peak_blocks(int64_t num_tokens, int32_t max_chunk) const {
  const int64_t whole = (num_tokens + block_size_ - 1) / block_size_;
  int64_t total = 0;
  for (int32_t w : windows_) {
    // A step's tokens, and the window behind its first one, straddle at most one extra block.
    const int64_t windowed = (int64_t(w) - 1 + max_chunk + block_size_ - 1) / block_size_ + 1;
    total += w == 0 ? whole : std::min(whole, windowed);
  }
  return total;
}

int32_t KvCacheManager::max_tokens_per_sequence(int32_t max_chunk, int32_t limit) const {
  int32_t lo = 0, hi = limit;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (peak_blocks(mid, max_chunk) <= num_blocks()) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

int32_t KvCacheManager::first_visible_block(int32_t group, int32_t position) const {
  const int32_t w = windows_[size_t(group)];
  return w == 0 ? 0 : std::max(0, position - w + 1) / block_size_;
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

// How many leading blocks of the prompt the cache can serve: every full-attention group must hold
// all of them; a sliding-window group only those the first computed token can see. found[g][i]:
// group g's cached block for block i, if any.
int32_t KvCacheManager::cached_prefix_blocks(const std::vector<BlockHash>& hashes, const std::vector<int32_t>& tokens,
                                             std::vector<std::vector<std::optional<int32_t>>>& found) const {
  int32_t usable = int32_t(hashes.size());
  found.assign(windows_.size(), std::vector<std::optional<int32_t>>(hashes.size()));
  for (int32_t i = 0; i < usable; ++i) {
    const std::vector<int32_t> block = block_tokens(tokens, i, block_size_);
    for (int32_t g = 0; g < num_groups(); ++g) {
      found[size_t(g)][size_t(i)] = pool_.lookup(group_key(hashes[size_t(i)], g), block);
      // A later block's KV depends on this one, so a full group's hit ends at its first miss.
      if (windows_[size_t(g)] == 0 && !found[size_t(g)][size_t(i)]) usable = i;
    }
  }
  for (int32_t k = usable; k > 0; --k) {
    bool served = true;
    for (int32_t g = 0; g < num_groups() && served; ++g) {
      for (int32_t i = first_visible_block(g, k * block_size_); i < k && served; ++i) {
        served = found[size_t(g)][size_t(i)].has_value();
      }
    }
    if (served) return k;
  }
  return 0;
}

int32_t KvCacheManager::acquire_cached_prefix(KvSequence& seq, const std::vector<int32_t>& tokens) {
  if (!seq.block_tables.empty()) throw std::logic_error("cached prefix asked for a sequence that has blocks");
  if (!pool_.caching_enabled()) return 0;
  stats_.queried_tokens += int64_t(tokens.size());
  // The last token's logits are needed to sample, so it is always computed, never taken from cache.
  const int32_t max_blocks = tokens.empty() ? 0 : int32_t((tokens.size() - 1) / block_size_);
  std::vector<BlockHash> hashes;
  BlockHash parent = kRootHash;
  for (int32_t i = 0; i < max_blocks; ++i) {
    parent = hash_block(parent, tokens.data() + ptrdiff_t(i) * block_size_);
    hashes.push_back(parent);
  }
  std::vector<std::vector<std::optional<int32_t>>> found;
  const int32_t hit = cached_prefix_blocks(hashes, tokens, found);
  seq.block_tables.assign(windows_.size(), {});
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = first_visible_block(g, hit * block_size_);
    for (int32_t i = 0; i < hit; ++i) {
      const int32_t block = i < first ? -1 : *found[size_t(g)][size_t(i)];
      if (block >= 0) pool_.acquire(block);
      seq.block_tables[size_t(g)].push_back(block);
    }
  }
  seq.block_hashes.assign(hashes.begin(), hashes.begin() + hit);
  seq.num_cached_tokens = hit * block_size_;
  stats_.hit_tokens += seq.num_cached_tokens;
  return seq.num_cached_tokens;
}

void KvCacheManager::free_invisible(KvSequence& seq, int32_t num_computed_tokens) {
  for (int32_t g = 0; g < num_groups(); ++g) {
    std::vector<int32_t>& table = seq.block_tables[size_t(g)];
    // Returned blocks form a prefix of the table, so walking back from the window's edge stops at it.
    int32_t i = std::min(first_visible_block(g, num_computed_tokens), int32_t(table.size())) - 1;
    for (; i >= 0 && table[size_t(i)] >= 0; --i) {
      pool_.free(table[size_t(i)]);
      table[size_t(i)] = -1;
    }
  }
}

bool KvCacheManager::allocate(KvSequence& seq, int32_t num_tokens, int32_t num_computed_tokens) {
  if (seq.block_tables.empty()) seq.block_tables.resize(windows_.size());
  free_invisible(seq, num_computed_tokens);
  const int32_t want = blocks_for(num_tokens);
  int64_t needed = 0;
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = first_visible_block(g, num_computed_tokens);
    for (int32_t i = int32_t(seq.block_tables[size_t(g)].size()); i < want; ++i) needed += i >= first;
  }
  if (needed > pool_.num_free_blocks()) return false;  // checked up front so a failure takes nothing
  for (int32_t g = 0; g < num_groups(); ++g) {
    const int32_t first = first_visible_block(g, num_computed_tokens);
    std::vector<int32_t>& table = seq.block_tables[size_t(g)];
    for (int32_t i = int32_t(table.size()); i < want; ++i) table.push_back(i >= first ? *pool_.allocate() : -1);
  }
  return true;
}

void KvCacheManager::cache_full_blocks(KvSequence& seq, const std::vector<int32_t>& tokens,
                                       int32_t num_computed_tokens) {
  if (num_computed_tokens < 0 || size_t(num_computed_tokens) > tokens.size()) {
    throw std::logic_error("more tokens computed than the sequence has");
  }
  if (!pool_.caching_enabled()) return;
  const int32_t num_full = num_computed_tokens / block_size_;
  if (num_full > 0 && (seq.block_tables.empty() || size_t(num_full) > seq.block_tables[0].size())) {
    throw std::logic_error("computed tokens outside the block table");
  }
  BlockHash parent = seq.block_hashes.empty() ? kRootHash : seq.block_hashes.back();
  for (int32_t i = int32_t(seq.block_hashes.size()); i < num_full; ++i) {
    const BlockHash hash = hash_block(parent, tokens.data() + ptrdiff_t(i) * block_size_);
    for (int32_t g = 0; g < num_groups(); ++g) {
      const int32_t block = seq.block_tables[size_t(g)][size_t(i)];
      if (block >= 0) pool_.cache(block, group_key(hash, g), block_tokens(tokens, i, block_size_));
    }
    seq.block_hashes.push_back(hash);  // kept even if another block holds this hash: later blocks chain on it
    parent = hash;
  }
}

void KvCacheManager::free(KvSequence& seq) {
  size_t longest = 0;
  for (const auto& table : seq.block_tables) longest = std::max(longest, table.size());
  for (size_t i = longest; i-- > 0;) {
    for (const auto& table : seq.block_tables) {
      if (i < table.size() && table[i] >= 0) pool_.free(table[i]);
    }
  }
  seq.block_tables.clear();
  seq.block_hashes.clear();
  seq.num_cached_tokens = 0;
  if (seq.copy_id >= 0) released_copies_.push_back(seq.copy_id);
  seq.copy_id = -1;
  seq.num_copied.clear();
}

// Unique in the process, not per manager: a runner that outlives one engine and serves the next
// (tests, tools) must never take a new sequence for an old one it still holds.
static std::atomic<int64_t> next_copy_id{0};

TableDelta KvCacheManager::take_table_delta(KvSequence& seq) {
  if (seq.copy_id < 0) {
    seq.copy_id = next_copy_id++;
    seq.num_copied.assign(seq.block_tables.size(), 0);
  }
  TableDelta delta{seq.copy_id, {}};
  bool grown = false;
  for (size_t g = 0; g < seq.block_tables.size(); ++g) grown |= seq.block_tables[g].size() > size_t(seq.num_copied[g]);
  if (!grown) return delta;  // most decode steps: nothing to allocate
  delta.new_blocks.resize(seq.block_tables.size());
  for (size_t g = 0; g < seq.block_tables.size(); ++g) {
    const std::vector<int32_t>& table = seq.block_tables[g];
    delta.new_blocks[g].assign(table.begin() + seq.num_copied[g], table.end());
    seq.num_copied[g] = int32_t(table.size());
  }
  return delta;
}

std::vector<int64_t> KvCacheManager::take_released_copies() { return std::exchange(released_copies_, {}); }

}  // namespace flashserve
