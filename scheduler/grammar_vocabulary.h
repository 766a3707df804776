// What constrained decoding sees of a model's vocabulary: each token's bytes and which tokens end
// generation. Built once per served model (the trie inside takes tens of milliseconds).
#pragma once
#include <cstdint>
#include <memory>
#include "grammar/token_masks.h"
#include "model/tokenizer.h"

namespace flashserve {

// `vocab_size` is the model's (its logit rows), which may exceed the tokenizer's: the extra ids
// have no text and are never allowed. Control tokens render as nothing, so no grammar produces them.
std::shared_ptr<const grammar::VocabularyIndex> grammar_vocabulary(const Tokenizer& tok, int32_t vocab_size);

}  // namespace flashserve
