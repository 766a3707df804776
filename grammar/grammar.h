// A context-free grammar over Unicode code points, flattened for the matcher (matcher.h): every
// alternative of every rule is a run of elements in one array, closed by an End element, so a
// position in the grammar is one int32 and "the next element" is position + 1.
//
// Repetitions and groups are already rewritten into rules by whoever built the grammar
// (gbnf_parser.h), so an element is only a character class or a reference to a rule. The builder
// checks what would make matching loop or fail later: references to rules nobody defined, a missing
// root, and left recursion (which includes a repetition of something that can match nothing).
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <map>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace flashserve::grammar {

// A grammar, schema or regex that cannot be compiled; what() names the problem for a 400.
class GrammarError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

// Range sets of code points: sorted, disjoint, touching ranges merged, nothing past U+10FFFF.
std::vector<CodeRange> normalized_ranges(std::vector<CodeRange> ranges);
// Every code point up to U+10FFFF outside `sorted` (a normalized set).
std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& sorted);
// A code point as GBNF text inside a literal, or with `in_class` inside [...]: printable ASCII as
// itself, specials and the rest escaped.
void append_gbnf_char(std::string& out, uint32_t cp, bool in_class);

struct Element {
  enum class Kind : uint8_t { Chars, Rule, End };
  Kind kind;
  int32_t index;  // Chars: class id; Rule: rule id; End: the rule it closes
};

// Bounds that keep a pathological grammar from taking unbounded memory or time to build.
constexpr size_t kMaxGrammarElements = size_t(1) << 20;
constexpr size_t kMaxGrammarRules = size_t(1) << 16;

class Grammar {
 public:
  int32_t root() const { return root_; }
  int32_t num_rules() const { return int32_t(rules_.size()); }
  const std::string& rule_name(int32_t rule) const { return rules_[rule].name; }
  // Position of the first element of each alternative of `rule`.
  const std::vector<int32_t>& alternatives(int32_t rule) const { return rules_[rule].alternatives; }
  const Element& at(int32_t pos) const { return elements_[pos]; }
  size_t num_elements() const { return elements_.size(); }

  const std::vector<CodeRange>& class_ranges(int32_t cls) const { return classes_[cls].ranges; }
  bool class_contains(int32_t cls, uint32_t cp) const;
  // Whether some code point in [lo, hi] is in the class (a partly read UTF-8 character).
  bool class_intersects(int32_t cls, uint32_t lo, uint32_t hi) const;

  // The grammar in GBNF, one rule a line (for error messages and debugging).
  std::string to_gbnf() const;

 private:
  friend class GrammarBuilder;
  struct Rule {
    std::string name;
    std::vector<int32_t> alternatives;
  };
  struct CharClass {
    std::vector<CodeRange> ranges;  // sorted, disjoint, never touching the surrogates
    uint64_t ascii[2] = {0, 0};     // code points 0-127 as bits, the common case
  };
  std::vector<Rule> rules_;
  std::vector<Element> elements_;
  std::vector<CharClass> classes_;
  int32_t root_ = -1;
};

// Builds a Grammar rule by rule. Rules may be referenced before they are defined; build() checks
// that every referenced rule got a definition.
class GrammarBuilder {
 public:
  // The id of the rule named `name`, creating it (undefined) on first use.
  int32_t rule(std::string_view name);
  // A fresh rule named after `base` ("base-1", "base-2", ...), for groups and repetitions.
  int32_t new_rule(std::string_view base);
  // Ranges in any order, possibly overlapping; `negate` takes the complement in U+0000..U+10FFFF.
  // Surrogate code points are never in a class (UTF-8 cannot carry them).
  int32_t char_class(std::vector<CodeRange> ranges, bool negate);

  // Defines `rule` as these alternatives, each a sequence of elements (Chars or Rule; an empty
  // sequence matches nothing). A rule is defined once.
  void define(int32_t rule, const std::vector<std::vector<Element>>& alternatives);
  bool defined(int32_t rule) const { return rules_[rule].defined; }
  const std::string& name(int32_t rule) const { return rules_[rule].name; }

  Grammar build(std::string_view root_name) &&;

 private:
  struct PendingRule {
    std::string name;
    std::vector<std::vector<Element>> alternatives;
    bool defined = false;
  };
  void check_left_recursion() const;

  std::vector<PendingRule> rules_;
  std::unordered_map<std::string, int32_t> rule_ids_;
  std::vector<Grammar::CharClass> classes_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, int32_t> class_ids_;
  size_t num_elements_ = 0;
};

}  // namespace flashserve::grammar
