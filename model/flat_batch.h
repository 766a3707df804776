// A ForwardBatch checked and flattened into per-token rows: what every backend's forward pass
// needs before launching anything (the CPU and the CUDA forward share it, so both refuse the same
// malformed batches with the same messages).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>
#include "model/forward_batch.h"
#include "model/model_config.h"

namespace flashserve {

// One sequence's rows of the flattened batch and its KV blocks.
struct SeqSpan {
  int32_t query_start;
  int32_t num_queries;
  int32_t context_len;  // positions 0 .. context_len-1, the new ones included
  const std::vector<int32_t>* block_tables;  // [KV group]
};

// The block tables a runner keeps across steps (SequenceInput::kept_id), as flatten() grows them:
// the host's copy, which slots and checks read (model/resident_tables.h keeps the backend's).
struct KeptTables {
  struct Kept {
    std::vector<std::vector<int32_t>> tables;  // [KV group]
    int64_t last_step = -1;                    // a sequence runs at most once a step
  };
  std::unordered_map<int64_t, Kept> by_id;
  int64_t step = 0;
};

struct FlatBatch {
  std::vector<int32_t> token_ids;     // [num_tokens]
  std::vector<int32_t> positions;     // [num_tokens]
  std::vector<int32_t> slot_mapping;  // [KV group][num_tokens]: where each token's K/V goes
  std::vector<SeqSpan> seqs;
  std::vector<int32_t> logit_rows;    // token rows to compute logits for
};

// Drops batch.released from `kept` first, then appends each kept sequence's new blocks: a block is
// checked once, when it arrives, so a step's cost follows its new tokens, not its contexts. Fills
// out.vocab_size, first_row and num_rows too. `windows` has one entry per KV group (0: full
// attention). Throws std::invalid_argument for a malformed batch (empty, token out of vocab, wrong
// number of block tables, one too short, a block out of range or missing where a query can see it,
// beyond the context, a kept id twice); the kept tables may then hold part of the batch's blocks,
// and the caller releases the batch's ids.
FlatBatch flatten(const ForwardBatch& batch, KeptTables& kept, const ModelConfig& cfg, int32_t block_size,
                  int32_t num_blocks, const std::vector<int32_t>& windows, ForwardOutput& out);

}  // namespace flashserve
