// Which tokens a grammar allows next, fast enough to run every decode step.
//
// Scanning the vocabulary from a parse state means stepping the matcher through every token's
// bytes. Most of that work does not depend on the whole parse stack, only on its top: a token is
// accepted or rejected inside the rule it starts in, whatever called that rule (XGrammar's
// context-independent tokens). So CompiledGrammar walks the token trie once per character-class
// position, with the stack cut below that position's rule (down to where the grammar alone fixes
// what follows), and sorts each token into accepted, rejected, or uncertain: it would need to
// continue in the caller to be judged. A step's mask is then, for each live stack, the position's
// accepted set plus its uncertain subtrees of the trie walked from the real stack.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>
#include "grammar/compile_budget.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace flashserve::grammar {

// Bit t % 32 of word t / 32 set: token t allowed (the sampler's layout, kernels/sampling.h).
using TokenBitmask = std::vector<uint32_t>;

struct VocabularyIndex {
  explicit VocabularyIndex(Vocabulary v) : vocab(std::move(v)), trie(vocab.token_bytes) {}
  size_t mask_words() const { return (vocab.token_bytes.size() + 31) / 32; }
  Vocabulary vocab;
  TokenTrie trie;
};

class CompiledGrammar {
 public:
  // Matching then runs on `g` with small rules copied per use (rule_inlining.h): grammar() is that.
  // Throws GrammarError when the tables would pass `max_table_bytes` or the compile its budget,
  // CompileCancelled when the budget's caller cancels it.
  CompiledGrammar(const Grammar& g, std::shared_ptr<const VocabularyIndex> vocab, CompileBudget budget = CompileBudget(),
                  size_t max_table_bytes = kMaxTableBytes);

  static constexpr size_t kMaxTableBytes = size_t(64) << 20;
  // What the per-position tables hold (what a cache of compiled grammars should count).
  size_t table_bytes() const { return table_bytes_; }
  // Trie steps the compile took (what CompileBudget counts).
  uint64_t compile_steps() const { return compile_steps_; }

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  const VocabularyIndex& vocab() const { return *vocab_; }

  struct PositionTokens {
    TokenBitmask accepted_bits;       // when many are accepted
    std::vector<int32_t> accepted;    // otherwise
    std::vector<int32_t> uncertain_roots;  // trie subtrees whose tokens need the real stack
  };
  // Null for positions that are not character classes.
  const PositionTokens* at(int32_t pos) const {
    const int32_t i = index_[size_t(pos)];
    return i < 0 ? nullptr : &positions_[size_t(i)];
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const VocabularyIndex> vocab_;
  std::vector<int32_t> index_;  // per grammar position
  std::vector<PositionTokens> positions_;
  size_t table_bytes_ = 0;
  uint64_t compile_steps_ = 0;
};

// One request's constrained decoding.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> g);
  // The tokens allowed next (mask resized to the vocabulary's words). End of generation where the
  // text is complete, and also where the grammar allows nothing more or is too ambiguous to follow
  // (kMaxParses), so a mask is never empty.
  void fill_mask(TokenBitmask& mask);
  // Moves past `token`; false (nothing changes) if the grammar does not allow it.
  bool accept(int32_t token);
  // The output so far is a complete sentence of the grammar.
  bool can_end() const { return matcher_.can_end(); }
  // Complete, and no longer text could be (end of generation is the only way on).
  bool must_end() const;

 private:
  void add_allowed(TokenBitmask& mask);
  void add_uncertain(Stepper& stepper, int32_t stack, const std::vector<int32_t>& roots, TokenBitmask& mask);

  std::shared_ptr<const CompiledGrammar> g_;
  Matcher matcher_;
  std::vector<MatchState> states_;  // per trie depth, reused between steps
  std::vector<uint8_t> context_;    // per trie depth: some stack reached kContext on the way
  std::vector<int32_t> path_, ancestors_;
  bool lost_ = false;  // the grammar became too ambiguous to follow: only end of generation is left
};

}  // namespace flashserve::grammar
