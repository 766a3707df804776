#include "grammar/token_masks.h"

#include <algorithm>

namespace flashserve::grammar {
namespace {

// Chains of rules each used from one place are followed this far when cutting a stack loose.
constexpr int kMaxChain = 16;
// Trie steps all positions' walks may take together: a bound on compile time (a few seconds).
constexpr uint64_t kMaxCompileSteps = 200'000'000;

enum class Verdict { Accepted, Uncertain };

bool has(const MatchState& s, int32_t id) { return std::binary_search(s.stacks.begin(), s.stacks.end(), id); }

// Steps every token of the trie from `start`, reporting the tokens that survive (Accepted) and
// those cut off after some stack reached kContext (Uncertain); everything else is rejected.
// Returns the steps taken.
template <class Report>
uint64_t walk(Stepper& stepper, const TokenTrie& trie, const MatchState& start, std::vector<MatchState>& states,
              Report&& report) {
  states.resize(size_t(trie.max_depth()) + 1);
  std::vector<uint8_t> context(states.size());
  states[0] = start;
  context[0] = has(start, kContext);
  uint64_t steps = 0;
  for (int32_t i = 0; i < trie.num_nodes();) {
    const size_t d = size_t(trie.depth(i));
    ++steps;
    if (stepper.step(states[d - 1], trie.byte(i), states[d])) {
      report(trie.tokens_at(i), Verdict::Accepted);
      context[d] = context[d - 1] || has(states[d], kContext);
      ++i;
    } else {
      if (context[d - 1]) report(trie.tokens_under(i), Verdict::Uncertain);
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

void set_bit(TokenBitmask& m, int32_t t) { m[size_t(t) >> 6] |= uint64_t(1) << (t & 63); }
bool test_bit(const TokenBitmask& m, int32_t t) { return (m[size_t(t) >> 6] >> (t & 63)) & 1; }

}  // namespace

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const VocabularyIndex> vocab)
    : grammar_(std::make_shared<const Grammar>(std::move(g))), vocab_(std::move(vocab)), index_(grammar_->num_elements(), -1) {
  const Grammar& gr = *grammar_;
  const Continuations continuations(gr);
  const size_t vocab_size = vocab_->vocab.token_bytes.size();
  StackPool pool;
  Stepper stepper(gr, pool);
  std::vector<MatchState> states;
  uint64_t steps = 0;
  for (int32_t pos = 0; pos < int32_t(gr.num_elements()); ++pos) {
    if (gr.at(pos).kind != Element::Kind::Chars) continue;
    const size_t mark = pool.size();
    MatchState start;
    start.stacks.push_back(pool.node(pos, continuations.parent(pool, continuations.rule_of(pos))));
    PositionTokens p;
    steps += walk(stepper, vocab_->trie, start, states, [&](std::span<const int32_t> tokens, Verdict v) {
      auto& to = v == Verdict::Accepted ? p.accepted : p.uncertain;
      to.insert(to.end(), tokens.begin(), tokens.end());
    });
    pool.rollback(mark);
    if (steps > kMaxCompileSteps) {
      throw GrammarError("grammar too complex: precomputing its token masks passed the limit of " +
                         std::to_string(kMaxCompileSteps) + " steps");
    }
    if (p.accepted.size() * 16 > vocab_size) {  // dense: a bitmask ORs faster than a list sets
      p.accepted_bits.assign(vocab_->mask_words(), 0);
      for (int32_t t : p.accepted) set_bit(p.accepted_bits, t);
      p.accepted = {};
    }
    std::sort(p.uncertain.begin(), p.uncertain.end());
    index_[size_t(pos)] = int32_t(positions_.size());
    positions_.push_back(std::move(p));
  }
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> g)
    : g_(std::move(g)), matcher_(g_->grammar_ptr()) {}

void GrammarMatcher::fill_mask(TokenBitmask& mask) {
  const VocabularyIndex& vocab = g_->vocab();
  mask.assign(vocab.mask_words(), 0);
  const MatchState& state = matcher_.state();
  StackPool& pool = matcher_.pool();
  const size_t mark = pool.size();
  Stepper stepper(g_->grammar(), pool);
  if (state.pending > 0) {  // inside a character: no position's sets apply, walk the trie
    std::vector<MatchState> states;
    walk(stepper, vocab.trie, state, states, [&](std::span<const int32_t> tokens, Verdict) {
      for (int32_t t : tokens) set_bit(mask, t);
    });
  } else {
    for (int32_t s : state.stacks) {
      if (s < 0) continue;
      const CompiledGrammar::PositionTokens& p = *g_->at(pool.pos(s));
      if (!p.accepted_bits.empty()) {
        for (size_t w = 0; w < mask.size(); ++w) mask[w] |= p.accepted_bits[w];
      }
      for (int32_t t : p.accepted) set_bit(mask, t);
      for (int32_t t : p.uncertain) {
        if (test_bit(mask, t)) continue;
        MatchState* cur = &scratch_[0];
        MatchState* next = &scratch_[1];
        cur->stacks.assign(1, s);
        cur->partial = cur->pending = cur->length = 0;
        bool ok = true;
        for (char c : vocab.vocab.token_bytes[size_t(t)]) {
          if (!(ok = stepper.step(*cur, uint8_t(c), *next))) break;
          std::swap(cur, next);
        }
        if (ok) set_bit(mask, t);
      }
    }
  }
  pool.rollback(mark);
  if (can_end()) {
    for (int32_t t : vocab.vocab.end_ids) set_bit(mask, t);
  }
}

bool GrammarMatcher::accept(int32_t token) {
  const Vocabulary& v = g_->vocab().vocab;
  if (token < 0 || size_t(token) >= v.token_bytes.size()) return false;
  if (std::find(v.end_ids.begin(), v.end_ids.end(), token) != v.end_ids.end()) return can_end();
  const std::string& bytes = v.token_bytes[size_t(token)];
  return !bytes.empty() && matcher_.advance(bytes);
}

bool GrammarMatcher::must_end() const {
  const MatchState& s = matcher_.state();
  return s.pending == 0 && s.stacks.size() == 1 && s.stacks[0] == kAccepted;
}

}  // namespace flashserve::grammar
