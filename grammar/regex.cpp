#include "grammar/regex.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <unordered_map>

#include "grammar/grammar.h"
#include "grammar/regex_ast.h"
#include "grammar/regex_parser.h"

namespace flashserve::grammar {
namespace {

// Parentheses nest at most this deep within one rule; deeper groups get rules of their own, so the
// output stays far inside the GBNF parser's nesting limit.
constexpr int kMaxParenDepth = 32;
// A class longer than this in GBNF (\w, \s, negations) gets a rule, written once however often used.
constexpr size_t kMaxInlineClass = 32;

constexpr CodeRange kSurrogates{0xD800, 0xDFFF};

std::string class_text(const CodeSet& set, bool negated) {
  std::string out = negated ? "[^" : "[";
  for (const CodeRange& r : set) {
    append_gbnf_char(out, r.lo, true);
    if (r.hi > r.lo + 1) out += '-';
    if (r.hi > r.lo) append_gbnf_char(out, r.hi, true);
  }
  return out + "]";
}

// Surrogates can never be matched (UTF-8 cannot carry them), so either form may include them:
// [^\n] is the short way to write everything but a newline.
std::string shortest_class_text(const CodeSet& set) {
  CodeSet with_surrogates = set;
  with_surrogates.push_back(kSurrogates);
  const CodeSet outside = complement_ranges(normalized_ranges(std::move(with_surrogates)));
  CodeSet inside;
  for (const CodeRange& r : set) {
    if (r.lo < kSurrogates.lo) inside.push_back({r.lo, std::min(r.hi, kSurrogates.lo - 1)});
    if (r.hi > kSurrogates.hi) inside.push_back({std::max(r.lo, kSurrogates.hi + 1), r.hi});
  }
  std::string plain = class_text(inside, false), negated = class_text(outside, true);
  return negated.size() < plain.size() ? negated : plain;
}

// How tightly a piece of GBNF binds, loosest first: what a context needs decides the parentheses.
enum class Binding { Alternation, Sequence, Postfix, Atom };

struct Fragment {
  std::string text;
  Binding binding;
  int depth = 0;  // parentheses nested inside text
};

bool is_single_code_point(const RegexNode& n) {
  return n.kind == RegexNode::Kind::Chars && n.chars.size() == 1 && n.chars[0].lo == n.chars[0].hi;
}

std::string repeat_suffix(uint32_t min, uint32_t max) {
  if (max == kUnbounded) return min == 0 ? "*" : min == 1 ? "+" : "{" + std::to_string(min) + ",}";
  if (min == 0 && max == 1) return "?";
  if (min == max) return "{" + std::to_string(min) + "}";
  return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

// Writes a RegexNode tree as GBNF. Nodes reached from more than one place (without_empty shares
// subtrees) are written once, as rules, so the text grows with the tree's size, not its paths.
class Emitter {
 public:
  explicit Emitter(std::string_view name) : name_(name) {}

  std::string emit(const RegexPtr& root) {
    count_uses(*root);
    std::string out = name_ + " ::= " + compose(*root).text + "\n";
    while (!pending_.empty()) {
      const RegexNode* n = pending_.front();
      pending_.pop_front();
      add_rule(rule_of_.at(n), compose(*n).text);
    }
    return out + rules_;
  }

 private:
  void count_uses(const RegexNode& root) {
    std::vector<const RegexNode*> todo{&root};
    while (!todo.empty()) {
      const RegexNode* n = todo.back();
      todo.pop_back();
      for (const RegexPtr& item : n->items) {
        if (uses_[item.get()]++ == 0) todo.push_back(item.get());
      }
    }
  }

  std::string new_rule_name(std::string_view kind) {
    std::string name = name_ + "-";
    if (!kind.empty()) name += std::string(kind) + "-";
    return name + std::to_string(++rules_made_);
  }

  void add_rule(const std::string& name, const std::string& body) { rules_ += name + " ::= " + body + "\n"; }

  Fragment fragment(const RegexNode& n) {
    const bool compound = n.kind != RegexNode::Kind::Empty && n.kind != RegexNode::Kind::Chars;
    if (!compound || uses_[&n] < 2) return compose(n);
    auto [it, added] = rule_of_.try_emplace(&n);
    if (added) {
      it->second = new_rule_name("");
      pending_.push_back(&n);
    }
    return {it->second, Binding::Atom};
  }

  // `f` in parentheses if it binds looser than `needed`, or in a rule if they would nest too deep.
  Fragment bound(Fragment f, Binding needed) {
    if (f.binding >= needed) return f;
    if (f.depth + 1 > kMaxParenDepth) {
      const std::string name = new_rule_name("");
      add_rule(name, f.text);
      return {name, Binding::Atom};
    }
    return {"(" + f.text + ")", Binding::Atom, f.depth + 1};
  }

  Fragment compose(const RegexNode& n) {
    switch (n.kind) {
      case RegexNode::Kind::Empty: return {"\"\"", Binding::Atom};
      case RegexNode::Kind::Chars: return chars(n.chars);
      case RegexNode::Kind::Seq: return sequence(n.items);
      case RegexNode::Kind::Alt: return alternation(n.items);
      case RegexNode::Kind::Repeat: break;
    }
    Fragment item = bound(fragment(*n.items[0]), Binding::Atom);
    return {item.text + repeat_suffix(n.min, n.max), Binding::Postfix, item.depth};
  }

  Fragment chars(const CodeSet& set) {
    if (set.size() == 1 && set[0].lo == set[0].hi) {
      std::string text = "\"";
      append_gbnf_char(text, set[0].lo, false);
      return {text + "\"", Binding::Atom};
    }
    std::string text = shortest_class_text(set);
    if (text.size() <= kMaxInlineClass) return {text, Binding::Atom};
    auto [it, added] = class_rules_.try_emplace(text);
    if (added) {
      it->second = new_rule_name("class");
      add_rule(it->second, text);
    }
    return {it->second, Binding::Atom};
  }

  // Runs of single characters become one literal: "abc", not "a" "b" "c".
  Fragment sequence(const std::vector<RegexPtr>& items) {
    std::vector<Fragment> parts;
    std::string literal;
    auto flush_literal = [&] {
      if (!literal.empty()) parts.push_back({"\"" + literal + "\"", Binding::Atom});
      literal.clear();
    };
    for (const RegexPtr& item : items) {
      if (is_single_code_point(*item)) {
        append_gbnf_char(literal, item->chars[0].lo, false);
        continue;
      }
      flush_literal();
      parts.push_back(bound(fragment(*item), Binding::Sequence));
    }
    flush_literal();
    if (parts.size() == 1) return parts[0];
    return joined(parts, " ", Binding::Sequence);
  }

  Fragment alternation(const std::vector<RegexPtr>& items) {
    std::vector<Fragment> parts;
    for (const RegexPtr& item : items) parts.push_back(fragment(*item));
    return joined(parts, " | ", Binding::Alternation);
  }

  static Fragment joined(const std::vector<Fragment>& parts, const char* separator, Binding binding) {
    Fragment out{"", binding};
    for (const Fragment& p : parts) {
      if (!out.text.empty()) out.text += separator;
      out.text += p.text;
      out.depth = std::max(out.depth, p.depth);
    }
    return out;
  }

  std::string name_;
  std::string rules_;  // helper rules, one a line
  int rules_made_ = 0;
  std::unordered_map<const RegexNode*, int> uses_;
  std::unordered_map<const RegexNode*, std::string> rule_of_;
  std::deque<const RegexNode*> pending_;  // shared nodes named but not yet written
  std::map<std::string, std::string> class_rules_;
};

bool is_rule_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
}

}  // namespace

std::string regex_to_gbnf(std::string_view pattern, std::string_view name) {
  if (!is_rule_name(name)) throw GrammarError("regex: '" + std::string(name) + "' is not a GBNF rule name");
  return Emitter(name).emit(parse_regex(pattern));
}

}  // namespace flashserve::grammar
