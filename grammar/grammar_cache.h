// Compiled grammars by their GBNF text: an application sends the same schema with every request,
// and compiling (the per-position token tables) costs milliseconds, a mask microseconds. Least
// recently used first out, past a number of grammars or of table bytes (a nested schema's tables
// take a few MB); safe to share between request threads.
#pragma once
#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include "grammar/token_masks.h"

namespace flashserve::grammar {

class GrammarCache {
 public:
  explicit GrammarCache(std::shared_ptr<const VocabularyIndex> vocab, size_t capacity = 64,
                        size_t max_bytes = size_t(256) << 20)
      : vocab_(std::move(vocab)), capacity_(capacity), max_bytes_(max_bytes) {}

  // The grammar `gbnf` (root rule "root") compiled for this vocabulary within CompileBudget's
  // limit. Throws GrammarError; CompileCancelled once `cancelled` says so.
  std::shared_ptr<const CompiledGrammar> get(const std::string& gbnf, std::function<bool()> cancelled = {});
  size_t size() const;
  size_t bytes() const;

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledGrammar>>;
  std::shared_ptr<const VocabularyIndex> vocab_;
  size_t capacity_, max_bytes_;
  size_t bytes_ = 0;  // table bytes of the grammars held
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace flashserve::grammar
