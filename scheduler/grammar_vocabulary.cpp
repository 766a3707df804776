#include "scheduler/grammar_vocabulary.h"

namespace flashserve {

std::shared_ptr<const grammar::VocabularyIndex> grammar_vocabulary(const Tokenizer& tok, int32_t vocab_size) {
  grammar::Vocabulary v;
  v.token_bytes.resize(size_t(vocab_size));
  for (int32_t t = 0; t < std::min(vocab_size, tok.vocab_size()); ++t) {
    v.token_bytes[size_t(t)] = tok.token_bytes(t, /*render_special=*/false);
  }
  for (int32_t t : tok.end_of_generation_ids()) {
    if (t < vocab_size) v.end_ids.push_back(t);
  }
  return std::make_shared<const grammar::VocabularyIndex>(std::move(v));
}

}  // namespace flashserve
