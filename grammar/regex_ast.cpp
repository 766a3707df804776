#include "grammar/regex_ast.h"

#include <algorithm>
#include <utility>

namespace flashserve::grammar {
namespace {

bool matches_nothing(const RegexNode& n) { return n.kind == RegexNode::Kind::Chars && n.chars.empty(); }

bool is_run(const RegexNode& n) {
  return n.kind == RegexNode::Kind::Repeat && n.min == 1 && n.max == kUnbounded;
}

RegexPtr runs_unwrapped(const RegexNode& alt) {
  std::vector<RegexPtr> alternatives;
  for (const RegexPtr& a : alt.items) alternatives.push_back(is_run(*a) ? a->items[0] : a);
  return regex_alt(std::move(alternatives));
}

RegexPtr node(RegexNode n) { return std::make_shared<const RegexNode>(std::move(n)); }

// A Seq or Alt of what was kept: nothing is ε, one item is itself.
RegexPtr composite(RegexNode::Kind kind, std::vector<RegexPtr> kept, bool nullable) {
  if (kept.empty()) return regex_empty();
  if (kept.size() == 1) return kept[0];
  RegexNode n;
  n.kind = kind;
  n.nullable = nullable;
  n.items = std::move(kept);
  return node(std::move(n));
}

}  // namespace

RegexPtr regex_empty() { return node({}); }

RegexPtr regex_chars(CodeSet set) {
  RegexNode n;
  n.kind = RegexNode::Kind::Chars;
  n.nullable = false;
  n.chars = std::move(set);
  return node(std::move(n));
}

RegexPtr regex_seq(std::vector<RegexPtr> items) {
  std::vector<RegexPtr> kept;
  for (RegexPtr& item : items) {
    if (matches_nothing(*item)) return item;
    if (item->kind != RegexNode::Kind::Empty) kept.push_back(std::move(item));
  }
  const bool nullable = std::all_of(kept.begin(), kept.end(), [](const RegexPtr& i) { return i->nullable; });
  return composite(RegexNode::Kind::Seq, std::move(kept), nullable);
}

// Single-character alternatives merge into one set, so a|b|c costs one class, not a rule.
RegexPtr regex_alt(std::vector<RegexPtr> items) {
  std::vector<RegexPtr> kept;
  CodeSet chars;
  bool any_chars = false, empty = false;
  for (RegexPtr& item : items) {
    if (item->kind == RegexNode::Kind::Chars) {
      chars.insert(chars.end(), item->chars.begin(), item->chars.end());
      any_chars = any_chars || !item->chars.empty();
    } else if (item->kind == RegexNode::Kind::Empty) {
      empty = true;
    } else {
      kept.push_back(std::move(item));
    }
  }
  if (any_chars) kept.insert(kept.begin(), regex_chars(normalized_ranges(std::move(chars))));
  if (empty) kept.push_back(regex_empty());
  if (kept.empty()) return regex_chars({});
  const bool nullable = std::any_of(kept.begin(), kept.end(), [](const RegexPtr& i) { return i->nullable; });
  return composite(RegexNode::Kind::Alt, std::move(kept), nullable);
}

// With ε in X, X^k contains every X^j for j <= k, so X{n,m} = (X less ε){0,m} and X{n,} = (X less ε)*.
RegexPtr regex_repeat(RegexPtr item, uint32_t min, uint32_t max) {
  if (max == 0) return regex_empty();
  if (item->nullable) {
    item = without_empty(item);
    min = 0;
  }
  if (matches_nothing(*item)) return min == 0 ? regex_empty() : item;
  if (min == 1 && max == 1) return item;
  // Runs inside runs parse many ways, and the matcher keeps a stack for each: (X+){n,m} = X{n,},
  // and (A | X+){n,} = (A | X){n,} since a run of X's is a run of (A | X)'s.
  if (is_run(*item)) return regex_repeat(item->items[0], min, kUnbounded);
  if (max == kUnbounded && item->kind == RegexNode::Kind::Alt) item = runs_unwrapped(*item);
  RegexNode n;
  n.kind = RegexNode::Kind::Repeat;
  n.nullable = min == 0;
  n.items = {std::move(item)};
  n.min = min;
  n.max = max;
  return node(std::move(n));
}

// For a sequence of nullable parts, a non-empty match takes its first character from some part i
// (every part before it matching ε): (A_i less ε) A_{i+1} ... A_k. The tails are built back to
// front and shared, so the result grows linearly with the sequence.
RegexPtr without_empty(const RegexPtr& n) {
  if (n->kind == RegexNode::Kind::Empty) return regex_chars({});
  if (!n->nullable) return n;  // Chars included
  if (n->kind == RegexNode::Kind::Repeat) return regex_repeat(n->items[0], 1, n->max);
  std::vector<RegexPtr> alternatives;
  if (n->kind == RegexNode::Kind::Alt) {
    for (const RegexPtr& item : n->items) alternatives.push_back(without_empty(item));
    return regex_alt(std::move(alternatives));
  }
  RegexPtr tail = regex_empty();
  for (auto it = n->items.rbegin(); it != n->items.rend(); ++it) {
    alternatives.push_back(regex_seq({without_empty(*it), tail}));
    tail = regex_seq({*it, tail});
  }
  return regex_alt(std::move(alternatives));
}

}  // namespace flashserve::grammar
