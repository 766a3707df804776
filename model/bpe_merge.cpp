#include "model/bpe_merge.h"

#include <algorithm>
#include <queue>

#include "model/utf8.h"

namespace flashserve {
namespace {

// Symbols form a doubly linked list over the word; a merged-away symbol keeps len 0.
struct Symbol {
  size_t begin, len;
  int32_t id;
  int prev, next;
};

struct Candidate {
  PairMerge merge;
  int left, right;
  size_t len;  // left.len + right.len when queued: a mismatch later means the pair went stale
};

struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.merge.priority > b.merge.priority || (a.merge.priority == b.merge.priority && a.left > b.left);
  }
};

std::vector<Symbol> initial_symbols(std::string_view word, const TokenLookup& lookup) {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < word.size();) {
    size_t len = std::min(utf8::char_len(static_cast<unsigned char>(word[pos])), word.size() - pos);
    int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, len, lookup(word.substr(pos, len)), index - 1, pos + len < word.size() ? index + 1 : -1});
    pos += len;
  }
  return symbols;
}

}  // namespace

std::vector<MergeSymbol> merge_symbols(std::string_view word, const TokenLookup& lookup, const PairRule& rule) {
  std::vector<Symbol> symbols = initial_symbols(word, lookup);
  std::priority_queue<Candidate, std::vector<Candidate>, WorseCandidate> queue;
  auto view = [&](const Symbol& s) { return MergeSymbol{word.substr(s.begin, s.len), s.id}; };
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol &l = symbols[left], &r = symbols[right];
    if (auto merge = rule(view(l), view(r))) queue.push({*merge, left, right, l.len + r.len});
  };

  for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol &l = symbols[c.left], &r = symbols[c.right];
    // Symbols only ever grow, so unchanged lengths mean the pair is still adjacent and current.
    if (l.len == 0 || r.len == 0 || l.len + r.len != c.len) continue;
    l.len += r.len;
    l.id = c.merge.id;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }

  std::vector<MergeSymbol> out;
  for (const Symbol& s : symbols) {
    if (s.len > 0) out.push_back(view(s));
  }
  return out;
}

}  // namespace flashserve
