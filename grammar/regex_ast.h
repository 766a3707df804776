// A parsed regular expression (regex_parser.h) as a tree of code-point sets, sequences,
// alternations and bounded repetitions, on its way to GBNF (regex.h).
//
// The constructors keep one invariant the emitted grammar depends on: a repeated node can never
// match the empty string. GBNF writes x* as `star ::= x star | ""`, which is left recursive when x
// can match nothing, and the grammar builder rejects it; (a?)* is therefore built as (a)*, which
// is the same language. Nodes are immutable and may be shared: without_empty reuses subtrees.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/grammar.h"

namespace flashserve::grammar {

// Regex code-point sets: sorted, disjoint, non-adjacent ranges.
using CodeSet = std::vector<CodeRange>;

constexpr uint32_t kLastCodePoint = 0x10FFFF;


struct RegexNode;
using RegexPtr = std::shared_ptr<const RegexNode>;

constexpr uint32_t kUnbounded = UINT32_MAX;

struct RegexNode {
  enum class Kind : uint8_t {
    Empty,   // the empty string
    Chars,   // one code point from `chars`; an empty set matches nothing at all
    Seq,     // `items` one after another
    Alt,     // any one of `items`
    Repeat,  // items[0], which is never nullable, min to max times (max may be kUnbounded)
  };
  Kind kind = Kind::Empty;
  bool nullable = true;  // whether it matches the empty string
  CodeSet chars;
  std::vector<RegexPtr> items;
  uint32_t min = 0, max = 0;
};

RegexPtr regex_empty();
RegexPtr regex_chars(CodeSet set);  // `set` normalized
RegexPtr regex_seq(std::vector<RegexPtr> items);
RegexPtr regex_alt(std::vector<RegexPtr> items);
// `item` min to max times; a nullable item is replaced by its non-empty part (see top), and runs
// inside runs ((a+)*, (b|a+)+) are flattened, which keeps the language and drops ambiguity.
RegexPtr regex_repeat(RegexPtr item, uint32_t min, uint32_t max);

// The same language less the empty string (an empty Chars set when nothing is left).
RegexPtr without_empty(const RegexPtr& node);

}  // namespace flashserve::grammar
