// Where a text is in a Grammar, byte by byte: the pushdown automaton that constrained decoding
// advances with each sampled token and asks which tokens may come next (token_masks.h).
//
// A parse stack is a chain of nodes (position, parent) in a StackPool: "match the element at
// position, then carry on with parent". Nodes are hash-consed, so equal stacks are the same id and
// a MatchState -- the sorted ids of every stack still alive, plus a partly read UTF-8 character --
// compares and hashes as plain integers. Stacks are kept normalized: the element at the top is
// always a character class; the id kAccepted is the empty stack (the grammar is complete).
// Ambiguous grammars keep one stack per live parse, deduplicated.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>
#include "grammar/grammar.h"

namespace flashserve::grammar {

constexpr int32_t kAccepted = -1;
// Parses alive at once. An ambiguous enough grammar could otherwise multiply them with every
// byte; past this, step() throws GrammarError.
constexpr size_t kMaxParses = 4096;
// The parent of a stack cut loose from its context (token_masks.h asks what a token does from one
// position alone); a parse that pops into it ends as the stack kContext: "depends on the caller".
constexpr int32_t kContext = -2;

class StackPool {
 public:
  int32_t node(int32_t pos, int32_t parent);
  int32_t pos(int32_t id) const { return nodes_[size_t(id)].pos; }
  int32_t parent(int32_t id) const { return nodes_[size_t(id)].parent; }
  size_t size() const { return nodes_.size(); }
  // Forgets every node made after size() was `mark` (a search's scratch stacks).
  void rollback(size_t mark);

 private:
  struct Node {
    int32_t pos, parent;
  };
  static uint64_t key(int32_t pos, int32_t parent) { return (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent); }
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> ids_;
};

struct MatchState {
  std::vector<int32_t> stacks;  // sorted, unique; empty: no parse survives
  // A character whose lead byte has been read: its bits so far, bytes still to come, its length.
  uint32_t partial = 0;
  uint8_t pending = 0;
  uint8_t length = 0;

  bool operator==(const MatchState& o) const {
    return stacks == o.stacks && partial == o.partial && pending == o.pending && length == o.length;
  }
};

// The stepping rules, shared by Matcher and the mask search, over a pool the caller owns.
class Stepper {
 public:
  Stepper(const Grammar& g, StackPool& pool) : g_(g), pool_(pool) {}
  MatchState initial();
  // The state after one more byte into `out` (which must not be `in`; its storage is reused); false
  // when no parse survives it. Stacks that reached kContext end there: they match no more bytes.
  // Throws GrammarError past kMaxParses.
  bool step(const MatchState& in, uint8_t byte, MatchState& out);
  // Whether the text so far is a complete sentence of the grammar.
  static bool can_end(const MatchState& s);

 private:
  void push_normalized(int32_t pos, int32_t parent, std::vector<int32_t>& out);
  void advance_char(const std::vector<int32_t>& stacks, uint32_t cp, std::vector<int32_t>& out);

  const Grammar& g_;
  StackPool& pool_;
};

// One request's place in its grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> g);
  // Consumes all of `bytes`, or none of them and returns false.
  bool advance(std::string_view bytes);
  bool can_end() const { return Stepper::can_end(state_); }
  const MatchState& state() const { return state_; }
  StackPool& pool() { return pool_; }
  const Grammar& grammar() const { return *g_; }

 private:
  std::shared_ptr<const Grammar> g_;
  StackPool pool_;
  MatchState state_;
};

}  // namespace flashserve::grammar
