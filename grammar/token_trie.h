// A vocabulary's tokens as a byte trie laid out in depth-first order, so a search that rejects a
// prefix skips every token under it with one jump (subtree_end), and the tokens under a node are
// one contiguous run.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace flashserve::grammar {

// What constrained decoding needs of a tokenizer.
struct Vocabulary {
  // Each token's bytes; "" for tokens a grammar never produces (control tokens).
  std::vector<std::string> token_bytes;
  // End-of-generation tokens: allowed exactly when the grammar is complete.
  std::vector<int32_t> end_ids;
};

class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& token_bytes);

  int32_t num_nodes() const { return int32_t(bytes_.size()); }
  uint8_t byte(int32_t node) const { return bytes_[size_t(node)]; }
  int32_t depth(int32_t node) const { return depths_[size_t(node)]; }  // 1 for a first byte
  int32_t parent(int32_t node) const { return parents_[size_t(node)]; }  // -1 for a first byte
  int32_t max_depth() const { return max_depth_; }
  // One past the last node under `node` (the next node that is not its descendant).
  int32_t subtree_end(int32_t node) const { return ends_[size_t(node)]; }
  // Tokens whose bytes end exactly at `node`; under it (itself included).
  std::span<const int32_t> tokens_at(int32_t node) const { return run(node, node + 1); }
  std::span<const int32_t> tokens_under(int32_t node) const { return run(node, subtree_end(node)); }

 private:
  std::span<const int32_t> run(int32_t from, int32_t to) const {
    return {tokens_.data() + first_token_[size_t(from)], size_t(first_token_[size_t(to)] - first_token_[size_t(from)])};
  }
  std::vector<uint8_t> bytes_;
  std::vector<int32_t> depths_, ends_, parents_;
  std::vector<int32_t> first_token_;  // per node, and one more at the end
  std::vector<int32_t> tokens_;
  int32_t max_depth_ = 0;
};

}  // namespace flashserve::grammar
