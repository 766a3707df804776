#include "grammar/rule_inlining.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace flashserve::grammar {
namespace {

template <class F>
void for_each_reference(const Grammar& g, int32_t rule, F&& f) {
  for (int32_t pos : g.alternatives(rule)) {
    for (; g.at(pos).kind != Element::Kind::End; ++pos) {
      if (g.at(pos).kind == Element::Kind::Rule) f(g.at(pos).index);
    }
  }
}

// Rules that can reach themselves (Tarjan's strongly connected components, iteratively).
std::vector<bool> recursive_rules(const Grammar& g) {
  const int32_t n = g.num_rules();
  std::vector<std::vector<int32_t>> refs(static_cast<size_t>(n));
  std::vector<bool> recursive(size_t(n), false);
  for (int32_t r = 0; r < n; ++r) {
    for_each_reference(g, r, [&](int32_t to) {
      refs[size_t(r)].push_back(to);
      if (to == r) recursive[size_t(r)] = true;
    });
  }
  std::vector<int32_t> index(size_t(n), -1), low(size_t(n), 0), stack;
  std::vector<bool> on_stack(size_t(n), false);
  int32_t next_index = 0;
  for (int32_t start = 0; start < n; ++start) {
    if (index[size_t(start)] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> path{{start, 0}};
    index[size_t(start)] = low[size_t(start)] = next_index++;
    stack.push_back(start);
    on_stack[size_t(start)] = true;
    while (!path.empty()) {
      auto& [r, i] = path.back();
      if (i < refs[size_t(r)].size()) {
        const int32_t to = refs[size_t(r)][i++];
        if (index[size_t(to)] < 0) {
          index[size_t(to)] = low[size_t(to)] = next_index++;
          stack.push_back(to);
          on_stack[size_t(to)] = true;
          path.push_back({to, 0});
        } else if (on_stack[size_t(to)]) {
          low[size_t(r)] = std::min(low[size_t(r)], index[size_t(to)]);
        }
        continue;
      }
      const int32_t done = r;
      path.pop_back();
      if (!path.empty()) low[size_t(path.back().first)] = std::min(low[size_t(path.back().first)], low[size_t(done)]);
      if (low[size_t(done)] != index[size_t(done)]) continue;
      std::vector<int32_t> component;
      for (int32_t m = -1; m != done;) {
        m = stack.back();
        stack.pop_back();
        on_stack[size_t(m)] = false;
        component.push_back(m);
      }
      if (component.size() > 1) {
        for (int32_t m : component) recursive[size_t(m)] = true;
      }
    }
  }
  return recursive;
}

class Inliner {
 public:
  explicit Inliner(const Grammar& g) : g_(g), recursive_(recursive_rules(g)), size_(size_t(g.num_rules()), 0) {
    uses_.assign(size_t(g.num_rules()), 0);
    ++uses_[size_t(g.root())];
    for (int32_t r = 0; r < g.num_rules(); ++r) for_each_reference(g, r, [&](int32_t to) { ++uses_[size_t(to)]; });
    // Every original name first, so the copies' generated names never take one.
    for (int32_t r = 0; r < g.num_rules(); ++r) shared_.push_back(b_.rule(g.rule_name(r)));
    emitted_.assign(size_t(g.num_rules()), false);
    budget_ = std::max<size_t>(4 * g.num_elements(), 1 << 16);
  }

  Grammar run() && {
    emitted_[size_t(g_.root())] = true;  // the root stays the rule of its name
    pending_.push_back({g_.root(), shared_[size_t(g_.root())]});
    while (!pending_.empty()) {
      const auto [from, to] = pending_.back();
      pending_.pop_back();
      emit(from, to);
    }
    // Rules nothing reaches any more (every use got a copy, or none existed) keep their names with
    // an empty body: no positions, so no token tables to build for them.
    for (int32_t r = 0; r < g_.num_rules(); ++r) {
      if (!b_.defined(shared_[size_t(r)])) b_.define(shared_[size_t(r)], {{}});
    }
    return std::move(b_).build(g_.rule_name(g_.root()));
  }

 private:
  // Elements of `rule` with its non-recursive references copied in, capped just past the limit.
  // A chain of references deeper than the limit holds more elements than it, so the recursion
  // stops there (without remembering the cut-off answer for the rule it stopped at).
  size_t deep_size(int32_t rule, size_t depth = 0) {
    constexpr size_t kTooBig = kMaxInlinedRuleElements + 1;
    if (recursive_[size_t(rule)] || depth > kMaxInlinedRuleElements) return kTooBig;
    size_t& s = size_[size_t(rule)];
    if (s > 0) return s;
    size_t total = 0;
    for (int32_t pos : g_.alternatives(rule)) {
      for (; g_.at(pos).kind != Element::Kind::End && total < kTooBig; ++pos) {
        total += 1 + (g_.at(pos).kind == Element::Kind::Rule ? deep_size(g_.at(pos).index, depth + 1) : 0);
      }
      ++total;
    }
    return s = std::min(total, kTooBig);
  }

  int32_t reference(int32_t rule) {
    if (uses_[size_t(rule)] < 2 || deep_size(rule) > kMaxInlinedRuleElements || copied_ + deep_size(rule) > budget_) {
      if (!emitted_[size_t(rule)]) {
        emitted_[size_t(rule)] = true;
        pending_.push_back({rule, shared_[size_t(rule)]});
      }
      return shared_[size_t(rule)];
    }
    copied_ += deep_size(rule);
    const int32_t copy = b_.new_rule(g_.rule_name(rule));
    pending_.push_back({rule, copy});
    return copy;
  }

  void emit(int32_t from, int32_t to) {
    std::vector<std::vector<Element>> alternatives;
    for (int32_t pos : g_.alternatives(from)) {
      std::vector<Element>& alt = alternatives.emplace_back();
      for (; g_.at(pos).kind != Element::Kind::End; ++pos) {
        const Element& e = g_.at(pos);
        alt.push_back(e.kind == Element::Kind::Rule ? Element{Element::Kind::Rule, reference(e.index)}
                                                    : Element{Element::Kind::Chars, b_.char_class(g_.class_ranges(e.index), false)});
      }
    }
    b_.define(to, alternatives);
  }

  const Grammar& g_;
  GrammarBuilder b_;
  std::vector<bool> recursive_, emitted_;
  std::vector<size_t> size_;
  std::vector<int32_t> uses_, shared_;
  std::vector<std::pair<int32_t, int32_t>> pending_;  // (original rule, its copy) still to write
  size_t budget_ = 0, copied_ = 0;
};

}  // namespace

Grammar inline_small_rules(const Grammar& g) { return Inliner(g).run(); }

}  // namespace flashserve::grammar
