#include "grammar/matcher.h"

#include <algorithm>
#include <string>

namespace flashserve::grammar {
namespace {

void sort_unique(std::vector<int32_t>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The code points a character of `length` bytes can still become, given its bits so far. The
// continuation bytes are checked strictly (no overlong forms, no surrogates, nothing past
// U+10FFFF), so every code point in the range is reachable.
CodeRange completions(uint32_t bits, int pending, int length) {
  constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  const uint32_t lo = bits << (6 * pending);
  const uint32_t hi = lo | ((uint32_t(1) << (6 * pending)) - 1);
  return {std::max(lo, kMin[length]), std::min<uint32_t>(hi, 0x10FFFF)};
}

// Whether `byte` may follow the lead byte `lead` as the second byte of a character (RFC 3629).
bool valid_second(uint32_t lead_bits, int length, uint8_t byte) {
  if ((byte & 0xC0) != 0x80) return false;
  if (length == 3 && lead_bits == 0x0) return byte >= 0xA0;  // E0: no overlong
  if (length == 3 && lead_bits == 0xD) return byte < 0xA0;   // ED: no surrogates
  if (length == 4 && lead_bits == 0x0) return byte >= 0x90;  // F0: no overlong
  if (length == 4 && lead_bits == 0x4) return byte < 0x90;   // F4: nothing past U+10FFFF
  return true;
}

}  // namespace

int32_t StackPool::node(int32_t pos, int32_t parent) {
  const auto [it, added] = ids_.try_emplace(key(pos, parent), int32_t(nodes_.size()));
  if (added) nodes_.push_back({pos, parent});
  return it->second;
}

void StackPool::rollback(size_t mark) {
  while (nodes_.size() > mark) {
    ids_.erase(key(nodes_.back().pos, nodes_.back().parent));
    nodes_.pop_back();
  }
}

// "Match the element at pos, then parent", rewritten into stacks whose top is a character class.
void Stepper::push_normalized(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
  const Element& e = g_.at(pos);
  switch (e.kind) {
    case Element::Kind::Chars:
      out.push_back(pool_.node(pos, parent));
      return;
    case Element::Kind::End:
      if (parent < 0) {
        out.push_back(parent);  // kAccepted, or kContext for a stack cut loose
      } else {
        push_normalized(pool_.pos(parent), pool_.parent(parent), out);
      }
      return;
    case Element::Kind::Rule: {
      // A reference in tail position continues straight with the parent: repetitions stay flat.
      const int32_t next = g_.at(pos + 1).kind == Element::Kind::End ? parent : pool_.node(pos + 1, parent);
      for (int32_t alt : g_.alternatives(e.index)) push_normalized(alt, next, out);
      return;
    }
  }
}

MatchState Stepper::initial() {
  MatchState s;
  for (int32_t alt : g_.alternatives(g_.root())) push_normalized(alt, kAccepted, s.stacks);
  sort_unique(s.stacks);
  return s;
}

void Stepper::advance_char(const std::vector<int32_t>& stacks, uint32_t cp, std::vector<int32_t>& out) {
  for (int32_t s : stacks) {
    if (s < 0) continue;
    const int32_t pos = pool_.pos(s);
    if (g_.class_contains(g_.at(pos).index, cp)) push_normalized(pos + 1, pool_.parent(s), out);
  }
  sort_unique(out);
}

bool Stepper::step(const MatchState& in, uint8_t byte, MatchState& next) {
  next.stacks.clear();
  next.partial = 0;
  next.pending = 0;
  next.length = 0;
  if (in.pending == 0) {
    if (byte < 0x80) {
      advance_char(in.stacks, byte, next.stacks);
    } else {
      const int length = (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
      if (length == 0 || byte == 0xC0 || byte == 0xC1 || byte > 0xF4) return false;
      next.length = uint8_t(length);
      next.pending = uint8_t(length - 1);
      next.partial = byte & (length == 2 ? 0x1F : length == 3 ? 0x0F : 0x07);
    }
  } else {
    const bool second = in.pending == in.length - 1;
    if (second ? !valid_second(in.partial, in.length, byte) : (byte & 0xC0) != 0x80) return false;
    next.partial = (in.partial << 6) | (byte & 0x3F);
    next.pending = uint8_t(in.pending - 1);
    next.length = in.length;
    if (next.pending == 0) {
      advance_char(in.stacks, next.partial, next.stacks);
      next.partial = 0;
      next.length = 0;
    }
  }
  if (next.pending > 0) {  // keep the stacks whose class some completion of the character is in
    const CodeRange r = completions(next.partial, next.pending, next.length);
    for (int32_t s : in.stacks) {
      if (s >= 0 && g_.class_intersects(g_.at(pool_.pos(s)).index, r.lo, r.hi)) next.stacks.push_back(s);
    }
  }
  if (next.stacks.size() > kMaxParses) {
    throw GrammarError("grammar too ambiguous: more than " + std::to_string(kMaxParses) + " parses at once");
  }
  return !next.stacks.empty();
}

bool Stepper::can_end(const MatchState& s) {
  return s.pending == 0 && std::binary_search(s.stacks.begin(), s.stacks.end(), kAccepted);
}

Matcher::Matcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)) { state_ = Stepper(*g_, pool_).initial(); }

bool Matcher::advance(std::string_view bytes) {
  Stepper stepper(*g_, pool_);
  MatchState s = state_, next;
  for (char c : bytes) {
    if (!stepper.step(s, uint8_t(c), next)) return false;
    std::swap(s, next);
  }
  state_ = std::move(s);
  return true;
}

}  // namespace flashserve::grammar
