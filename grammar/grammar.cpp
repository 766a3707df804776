#include "grammar/grammar.h"

#include <algorithm>
#include <cstdio>

namespace flashserve::grammar {
namespace {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

std::vector<CodeRange> without_surrogates(const std::vector<CodeRange>& sorted) {
  std::vector<CodeRange> out;
  for (const CodeRange& r : sorted) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

}  // namespace

std::vector<CodeRange> normalized_ranges(std::vector<CodeRange> ranges) {
  std::vector<CodeRange> out;
  for (CodeRange& r : ranges) r.hi = std::min(r.hi, kMaxCodePoint);
  std::sort(ranges.begin(), ranges.end(), [](CodeRange a, CodeRange b) { return a.lo < b.lo; });
  for (const CodeRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!out.empty() && r.lo <= out.back().hi + 1) {
      out.back().hi = std::max(out.back().hi, r.hi);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<CodeRange> complement_ranges(const std::vector<CodeRange>& sorted) {
  std::vector<CodeRange> out;
  uint32_t next = 0;
  for (const CodeRange& r : sorted) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

void append_gbnf_char(std::string& out, uint32_t cp, bool in_class) {
  const bool special = cp == '"' || cp == '\\' || (in_class && (cp == ']' || cp == '-' || cp == '^'));
  if (special) {
    out += '\\';
    out += char(cp);
  } else if (cp == '\n' || cp == '\r' || cp == '\t') {
    out += cp == '\n' ? "\\n" : cp == '\r' ? "\\r" : "\\t";
  } else if (cp >= 0x20 && cp < 0x7F) {
    out += char(cp);
  } else {
    char buf[16];
    std::snprintf(buf, sizeof buf, cp <= 0xFF ? "\\x%02X" : cp <= 0xFFFF ? "\\u%04X" : "\\U%08X", unsigned(cp));
    out += buf;
  }
}

bool Grammar::class_contains(int32_t cls, uint32_t cp) const {
  const CharClass& c = classes_[cls];
  if (cp < 128) return (c.ascii[cp >> 6] >> (cp & 63)) & 1;
  auto it = std::upper_bound(c.ranges.begin(), c.ranges.end(), cp, [](uint32_t v, CodeRange r) { return v < r.lo; });
  return it != c.ranges.begin() && cp <= std::prev(it)->hi;
}

bool Grammar::class_intersects(int32_t cls, uint32_t lo, uint32_t hi) const {
  for (const CodeRange& r : classes_[cls].ranges) {
    if (r.lo <= hi && lo <= r.hi) return true;
  }
  return false;
}

std::string Grammar::to_gbnf() const {
  std::string out;
  for (const Rule& rule : rules_) {
    out += rule.name + " ::=";
    for (size_t a = 0; a < rule.alternatives.size(); ++a) {
      if (a > 0) out += " |";
      for (int32_t pos = rule.alternatives[a]; elements_[pos].kind != Element::Kind::End; ++pos) {
        const Element& e = elements_[pos];
        out += ' ';
        if (e.kind == Element::Kind::Rule) {
          out += rules_[e.index].name;
          continue;
        }
        const std::vector<CodeRange>& ranges = classes_[e.index].ranges;
        if (ranges.size() == 1 && ranges[0].lo == ranges[0].hi) {
          out += '"';
          append_gbnf_char(out, ranges[0].lo, false);
          out += '"';
          continue;
        }
        out += '[';
        for (const CodeRange& r : ranges) {
          append_gbnf_char(out, r.lo, true);
          if (r.hi != r.lo) {
            out += '-';
            append_gbnf_char(out, r.hi, true);
          }
        }
        out += ']';
      }
      if (rule.alternatives.size() > 1 && elements_[rule.alternatives[a]].kind == Element::Kind::End) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

int32_t GrammarBuilder::rule(std::string_view name) {
  const auto [it, added] = rule_ids_.try_emplace(std::string(name), int32_t(rules_.size()));
  if (!added) return it->second;
  if (rules_.size() >= kMaxGrammarRules) {
    rule_ids_.erase(it);
    throw GrammarError("grammar has more than 65536 rules");
  }
  rules_.push_back({std::string(name), {}, false});
  return it->second;
}

int32_t GrammarBuilder::new_rule(std::string_view base) {
  for (size_t n = rules_.size();; ++n) {
    const std::string name = std::string(base) + "-" + std::to_string(n);
    if (!rule_ids_.count(name)) return rule(name);
  }
}

int32_t GrammarBuilder::char_class(std::vector<CodeRange> ranges, bool negate) {
  std::vector<CodeRange> sorted = normalized_ranges(std::move(ranges));
  if (negate) sorted = complement_ranges(sorted);
  sorted = without_surrogates(sorted);
  std::vector<std::pair<uint32_t, uint32_t>> key;
  for (const CodeRange& r : sorted) key.emplace_back(r.lo, r.hi);
  const auto [it, added] = class_ids_.try_emplace(std::move(key), int32_t(classes_.size()));
  if (!added) return it->second;
  Grammar::CharClass c;
  for (const CodeRange& r : sorted) {
    for (uint32_t cp = r.lo; cp <= std::min<uint32_t>(r.hi, 127); ++cp) c.ascii[cp >> 6] |= uint64_t(1) << (cp & 63);
  }
  c.ranges = std::move(sorted);
  classes_.push_back(std::move(c));
  return int32_t(classes_.size() - 1);
}

void GrammarBuilder::define(int32_t rule, const std::vector<std::vector<Element>>& alternatives) {
  PendingRule& r = rules_[rule];
  if (r.defined) throw GrammarError("rule '" + r.name + "' is defined twice");
  for (const auto& alt : alternatives) num_elements_ += alt.size() + 1;
  if (num_elements_ > kMaxGrammarElements) throw GrammarError("grammar has more than 1048576 elements");
  r.alternatives = alternatives;
  r.defined = true;
}

// A rule that can reach itself without consuming a character would make the matcher expand forever.
void GrammarBuilder::check_left_recursion() const {
  const size_t n = rules_.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::Kind::Rule && nullable[e.index];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<int32_t>> leads(n);  // rules reachable as the first thing consumed
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : rules_[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != Element::Kind::Rule) break;
        leads[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  enum : uint8_t { kNew, kOnPath, kDone };
  std::vector<uint8_t> state(n, kNew);
  // Iterative depth-first search: a deep grammar must not overflow the stack.
  for (size_t start = 0; start < n; ++start) {
    if (state[start] != kNew) continue;
    std::vector<std::pair<int32_t, size_t>> path{{int32_t(start), 0}};
    state[start] = kOnPath;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == leads[r].size()) {
        state[r] = kDone;
        path.pop_back();
        continue;
      }
      const int32_t to = leads[r][next++];
      if (state[to] == kOnPath) {
        throw GrammarError("rule '" + rules_[to].name +
                           "' is left-recursive (it can reach itself before matching a character, e.g. a "
                           "repetition of something that can be empty)");
      }
      if (state[to] == kNew) {
        state[to] = kOnPath;
        path.push_back({to, 0});
      }
    }
  }
}

Grammar GrammarBuilder::build(std::string_view root_name) && {
  for (const PendingRule& r : rules_) {
    if (!r.defined) throw GrammarError("rule '" + r.name + "' is used but never defined");
  }
  int32_t root = -1;
  if (auto it = rule_ids_.find(std::string(root_name)); it != rule_ids_.end()) root = it->second;
  if (root < 0) throw GrammarError("grammar has no rule named '" + std::string(root_name) + "'");
  check_left_recursion();
  Grammar g;
  g.root_ = root;
  g.classes_ = std::move(classes_);
  g.elements_.reserve(num_elements_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    Grammar::Rule rule{std::move(rules_[r].name), {}};
    for (const auto& alt : rules_[r].alternatives) {
      rule.alternatives.push_back(int32_t(g.elements_.size()));
      g.elements_.insert(g.elements_.end(), alt.begin(), alt.end());
      g.elements_.push_back({Element::Kind::End, int32_t(r)});
    }
    g.rules_.push_back(std::move(rule));
  }
  return g;
}

}  // namespace flashserve::grammar
