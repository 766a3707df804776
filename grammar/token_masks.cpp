#include "grammar/token_masks.h"

#include <algorithm>
#include <numeric>

#include "grammar/rule_inlining.h"

namespace flashserve::grammar {
namespace {

// Chains of rules each used from one place are followed this far when cutting a stack loose.
constexpr int kMaxChain = 16;

bool has(const MatchState& s, int32_t id) { return std::binary_search(s.stacks.begin(), s.stacks.end(), id); }

// Steps the trie's nodes [begin, end) -- whole subtrees -- on from states[depth(begin) - 1],
// reporting the tokens that survive (accepted) and the roots of subtrees cut off after some stack
// reached kContext (uncertain); everything else is rejected. `context` is scratch per depth, like
// `states` (kept by the caller: masks are computed every step). Returns the steps taken.
template <class Accept, class Uncertain>
uint64_t walk(Stepper& stepper, const TokenTrie& trie, int32_t begin, int32_t end, std::vector<MatchState>& states,
              std::vector<uint8_t>& context, Accept&& accept, Uncertain&& uncertain) {
  context.resize(states.size());
  const size_t base = size_t(trie.depth(begin)) - 1;
  context[base] = has(states[base], kContext);
  uint64_t steps = 0;
  for (int32_t i = begin; i < end;) {
    const size_t d = size_t(trie.depth(i));
    ++steps;
    if (stepper.step(states[d - 1], trie.byte(i), states[d])) {
      accept(trie.tokens_at(i));
      context[d] = context[d - 1] || has(states[d], kContext);
      ++i;
    } else {
      if (context[d - 1]) uncertain(i);
      i = trie.subtree_end(i);
    }
  }
  return steps;
}

// For each rule, where the grammar alone says a stack entering it goes on afterwards: the one
// place it is used from, followed up through rules that are themselves used from one place.
class Continuations {
 public:
  explicit Continuations(const Grammar& g) : g_(g), rule_of_(g.num_elements()), uses_(size_t(g.num_rules())) {
    for (int32_t pos = int32_t(g.num_elements()) - 1, rule = -1; pos >= 0; --pos) {
      if (g.at(pos).kind == Element::Kind::End) rule = g.at(pos).index;
      rule_of_[size_t(pos)] = rule;
    }
    uses_[size_t(g.root())].push_back(kAccepted);  // the start of the text
    for (int32_t pos = 0; pos < int32_t(g.num_elements()); ++pos) {
      const Element& e = g.at(pos);
      if (e.kind != Element::Kind::Rule) continue;
      const bool self_tail = e.index == rule_of_[size_t(pos)] && g.at(pos + 1).kind == Element::Kind::End;
      if (!self_tail) uses_[size_t(e.index)].push_back(pos);  // a self tail call keeps the continuation
    }
  }
  int32_t rule_of(int32_t pos) const { return rule_of_[size_t(pos)]; }

  // The parent a stack gets when rule `rule` is entered: a pool node, kAccepted, or kContext.
  int32_t parent(StackPool& pool, int32_t rule, int depth = 0) const {
    const std::vector<int32_t>& uses = uses_[size_t(rule)];
    if (uses.size() != 1 || depth == kMaxChain) return kContext;
    const int32_t use = uses[0];
    if (use == kAccepted) return kAccepted;
    const int32_t outer = parent(pool, rule_of_[size_t(use)], depth + 1);
    return g_.at(use + 1).kind == Element::Kind::End ? outer : pool.node(use + 1, outer);
  }

 private:
  const Grammar& g_;
  std::vector<int32_t> rule_of_;
  std::vector<std::vector<int32_t>> uses_;
};

void set_bit(TokenBitmask& m, int32_t t) { m[size_t(t) >> 5] |= uint32_t(1) << (t & 31); }

// The character positions, spread out: a prime stride through them, so that the first walks are a
// fair sample of the grammar for CompileBudget's projection (a grammar's costly positions tend to
// sit together, e.g. the run of one long repetition).
std::vector<int32_t> walk_order(const Grammar& g) {
  std::vector<int32_t> chars;
  for (int32_t pos = 0; pos < int32_t(g.num_elements()); ++pos) {
    if (g.at(pos).kind == Element::Kind::Chars) chars.push_back(pos);
  }
  const size_t n = chars.size();
  size_t stride = 7919;
  while (n > 0 && std::gcd(stride, n) != 1) stride += 2;  // odd and coprime to n: every position once
  std::vector<int32_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = chars[k * stride % n];
  return order;
}

}  // namespace

CompiledGrammar::CompiledGrammar(const Grammar& g, std::shared_ptr<const VocabularyIndex> vocab, CompileBudget budget,
                                 size_t max_table_bytes)
    : grammar_(std::make_shared<const Grammar>(inline_small_rules(g))), vocab_(std::move(vocab)), index_(grammar_->num_elements(), -1) {
  const Grammar& gr = *grammar_;
  const Continuations continuations(gr);
  const size_t vocab_size = vocab_->vocab.token_bytes.size();
  StackPool pool;
  Stepper stepper(gr, pool);
  const TokenTrie& trie = vocab_->trie;
  std::vector<MatchState> states(size_t(trie.max_depth()) + 1);
  std::vector<uint8_t> context;
  const std::vector<int32_t> order = walk_order(gr);
  budget.start(uint64_t(trie.num_nodes()), order.size());
  for (int32_t pos : order) {
    const size_t mark = pool.size();
    states[0].stacks.assign(1, pool.node(pos, continuations.parent(pool, continuations.rule_of(pos))));
    PositionTokens p;
    budget.spend(walk(
        stepper, trie, 0, trie.num_nodes(), states, context,
        [&](std::span<const int32_t> tokens) { p.accepted.insert(p.accepted.end(), tokens.begin(), tokens.end()); },
        [&](int32_t node) { p.uncertain_roots.push_back(node); }));
    pool.rollback(mark);
    if (p.accepted.size() * 16 > vocab_size) {  // dense: a bitmask ORs faster than a list sets
      p.accepted_bits.assign(vocab_->mask_words(), 0);
      for (int32_t t : p.accepted) set_bit(p.accepted_bits, t);
      p.accepted = {};
    }
    table_bytes_ += sizeof(uint32_t) * (p.accepted_bits.size() + p.accepted.size() + p.uncertain_roots.size());
    if (table_bytes_ > max_table_bytes) {
      throw GrammarError("grammar too large: its token tables passed " +
                         (max_table_bytes >= (size_t(1) << 20) ? std::to_string(max_table_bytes >> 20) + " MiB"
                                                               : std::to_string(max_table_bytes) + " bytes"));
    }
    index_[size_t(pos)] = int32_t(positions_.size());
    positions_.push_back(std::move(p));
  }
  compile_steps_ = budget.spent();
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> g)
    : g_(std::move(g)), matcher_(g_->grammar_ptr()) {}

// The uncertain subtrees of a position, judged from the real stack: each root's prefix is stepped
// once (roots come in trie order, so neighbours share what is already stepped), then its subtree
// is walked with pruning.
void GrammarMatcher::add_uncertain(Stepper& stepper, int32_t stack, const std::vector<int32_t>& roots, TokenBitmask& mask) {
  const TokenTrie& trie = g_->vocab().trie;
  states_.resize(size_t(trie.max_depth()) + 1);
  path_.assign(states_.size(), -1);
  states_[0].stacks.assign(1, stack);
  states_[0].partial = states_[0].pending = states_[0].length = 0;
  size_t valid = 0;  // states_[0..valid] hold the states after path_[1..valid]
  std::vector<int32_t>& ancestors = ancestors_;
  for (int32_t root : roots) {
    ancestors.clear();
    for (int32_t a = trie.parent(root); a >= 0; a = trie.parent(a)) ancestors.push_back(a);
    std::reverse(ancestors.begin(), ancestors.end());  // ancestors[j] is at depth j + 1
    size_t common = 0;
    while (common < valid && common < ancestors.size() && path_[common + 1] == ancestors[common]) ++common;
    valid = common;
    bool alive = true;
    for (; valid < ancestors.size(); ++valid) {
      path_[valid + 1] = ancestors[valid];
      if (!stepper.step(states_[valid], trie.byte(ancestors[valid]), states_[valid + 1])) {
        alive = false;
        break;
      }
    }
    if (!alive) continue;
    walk(
        stepper, trie, root, trie.subtree_end(root), states_, context_,
        [&](std::span<const int32_t> tokens) {
          for (int32_t t : tokens) set_bit(mask, t);
        },
        [](int32_t) {});
  }
}

void GrammarMatcher::fill_mask(TokenBitmask& mask) {
  const VocabularyIndex& vocab = g_->vocab();
  mask.assign(vocab.mask_words(), 0);
  StackPool& pool = matcher_.pool();
  const size_t mark = pool.size();
  try {
    if (!lost_) add_allowed(mask);
  } catch (const GrammarError&) {  // too ambiguous to go on: end the text here
    lost_ = true;
    mask.assign(vocab.mask_words(), 0);
  }
  pool.rollback(mark);
  // A grammar that allows nothing more (a class no character is in) ends the text rather than
  // leave the sampler nothing to pick.
  const bool none = std::all_of(mask.begin(), mask.end(), [](uint32_t w) { return w == 0; });
  if (can_end() || none) {
    for (int32_t t : vocab.vocab.end_ids) set_bit(mask, t);
  }
}

void GrammarMatcher::add_allowed(TokenBitmask& mask) {
  const VocabularyIndex& vocab = g_->vocab();
  const MatchState& state = matcher_.state();
  StackPool& pool = matcher_.pool();
  Stepper stepper(g_->grammar(), pool);
  if (state.pending > 0) {  // inside a character: no position's tables apply, walk the trie
    states_.resize(size_t(vocab.trie.max_depth()) + 1);
    states_[0] = state;
    walk(
        stepper, vocab.trie, 0, vocab.trie.num_nodes(), states_, context_,
        [&](std::span<const int32_t> tokens) {
          for (int32_t t : tokens) set_bit(mask, t);
        },
        [](int32_t) {});
  } else {
    for (int32_t s : state.stacks) {
      if (s < 0) continue;
      const CompiledGrammar::PositionTokens& p = *g_->at(pool.pos(s));
      if (!p.accepted_bits.empty()) {
        for (size_t w = 0; w < mask.size(); ++w) mask[w] |= p.accepted_bits[w];
      }
      for (int32_t t : p.accepted) set_bit(mask, t);
      add_uncertain(stepper, s, p.uncertain_roots, mask);
    }
  }
}

bool GrammarMatcher::accept(int32_t token) {
  const Vocabulary& v = g_->vocab().vocab;
  if (token < 0 || size_t(token) >= v.token_bytes.size()) return false;
  if (std::find(v.end_ids.begin(), v.end_ids.end(), token) != v.end_ids.end()) return can_end();
  const std::string& bytes = v.token_bytes[size_t(token)];
  try {
    return !bytes.empty() && matcher_.advance(bytes);
  } catch (const GrammarError&) {
    lost_ = true;
    return false;
  }
}

bool GrammarMatcher::must_end() const {
  const MatchState& s = matcher_.state();
  return s.pending == 0 && s.stacks.size() == 1 && s.stacks[0] == kAccepted;
}

}  // namespace flashserve::grammar
