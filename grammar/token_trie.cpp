#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>
#include <string_view>

namespace flashserve::grammar {

// Tokens sorted by their bytes meet the trie's depth-first order: a token follows every prefix of
// it, so each token's node is either new or the previous token's (equal bytes).
TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) {
  std::vector<int32_t> order;
  for (size_t t = 0; t < token_bytes.size(); ++t) {
    if (!token_bytes[t].empty()) order.push_back(int32_t(t));
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return token_bytes[a] < token_bytes[b]; });
  std::vector<int32_t> path;  // node at each depth of the previous token's bytes
  std::string_view prev;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth) {
      ends_[size_t(path.back())] = int32_t(bytes_.size());
      path.pop_back();
    }
  };
  for (int32_t t : order) {
    const std::string_view s = token_bytes[size_t(t)];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      parents_.push_back(path.empty() ? -1 : path.back());
      path.push_back(int32_t(bytes_.size()));
      bytes_.push_back(uint8_t(s[d]));
      depths_.push_back(int32_t(d + 1));
      ends_.push_back(0);
      first_token_.push_back(int32_t(tokens_.size()));
    }
    tokens_.push_back(t);
    max_depth_ = std::max(max_depth_, int32_t(s.size()));
    prev = s;
  }
  close_to(0);
  first_token_.push_back(int32_t(tokens_.size()));
}

}  // namespace flashserve::grammar
