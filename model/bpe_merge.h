// The merge loop both tokenizer models share: start from the characters of a word and keep fusing
// the best adjacent pair until no pair may merge. Byte-level BPE ranks pairs by merge order,
// SentencePiece by the score of the merged token.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <vector>

namespace flashserve {

// A symbol of the word being merged: its bytes (a view into the word) and its vocabulary id, -1
// if it is no token.
struct MergeSymbol {
  std::string_view text;
  int32_t id;
};

struct PairMerge {
  double priority;  // lower merges first; ties go to the leftmost pair
  int32_t id;       // the merged symbol's id
};

// How `left` and the symbol right after it merge, or nullopt if they never do. Their merged text
// is std::string_view(left.text.data(), left.text.size() + right.text.size()).
using PairRule = std::function<std::optional<PairMerge>(const MergeSymbol& left, const MergeSymbol& right)>;
using TokenLookup = std::function<int32_t(std::string_view)>;

// The symbols `word` ends up as, in order. Starts from its UTF-8 characters (a truncated or invalid
// sequence counts as single bytes), identified with `lookup`.
std::vector<MergeSymbol> merge_symbols(std::string_view word, const TokenLookup& lookup, const PairRule& rule);

}  // namespace flashserve
