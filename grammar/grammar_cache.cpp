#include "grammar/grammar_cache.h"

#include "grammar/gbnf_parser.h"

namespace flashserve::grammar {

std::shared_ptr<const CompiledGrammar> GrammarCache::get(const std::string& gbnf, std::function<bool()> cancelled) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = index_.find(gbnf); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  // Compiled outside the lock, so one slow grammar holds up no other request; two requests racing
  // on the same new text both compile it, and the second insert finds the first's.
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), vocab_,
                                                          CompileBudget(std::move(cancelled)));
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(gbnf); it != index_.end()) return it->second->second;
  lru_.emplace_front(gbnf, compiled);
  index_.emplace(gbnf, lru_.begin());
  bytes_ += compiled->table_bytes();
  // The newest stays even alone over the byte budget: its request needs it either way.
  while (lru_.size() > 1 && (lru_.size() > capacity_ || bytes_ > max_bytes_)) {
    bytes_ -= lru_.back().second->table_bytes();
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace flashserve::grammar
