// What the model executes in one step: a ragged batch of sequences, each adding some new tokens
// (a whole prompt, a chunk of one, or a single decode token) on top of what its KV cache holds.
// Prefill and decode are the same thing here: num_computed_tokens catching up to the token count.
#pragma once
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>
#include "kernels/sampling.h"

namespace flashserve {

// Which of a sequence's new tokens get logits: the LM head is the largest matmul, so a prefill
// chunk that does not reach the end of the prompt asks for none.
enum class LogitRows { Last, All, None };

// What the runner needs to pick a sequence's next token: the request's parameters, this step's
// uniform and the tokens its bias and history touch (the request's RNG and history stay with the
// scheduler's RequestSampler), and how many logprobs to return. Runners sample where the logits
// are, so only tokens cross back to the host.
struct SamplingStep {
  kernels::SamplingRow row;  // adjust_begin / adjust_end index `adjusts`; mask_row is the runner's
  std::vector<kernels::TokenAdjust> adjusts;
  // Constrained decoding: the tokens allowed this step (kernels::mask_words(vocab) words, at least
  // one bit set); empty: every token.
  std::vector<uint32_t> mask;
  int32_t logprobs = -1;     // -1: none; n >= 0: the token's logprob and the n best
};

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;                                 // log p of token under the raw logits (if asked)
  std::vector<std::pair<int32_t, float>> top_logprobs;  // the asked-for best (token, logprob), best first
};

struct SequenceInput {
  int32_t num_computed_tokens = 0;  // tokens of this sequence already in the KV cache
  std::vector<int32_t> token_ids;   // new tokens; at positions num_computed_tokens, +1, ...
  // Per KV group (model/kv_groups.h; one for most models), the blocks for positions 0 ..
  // num_computed_tokens + new - 1: all of them, or with a kept_id the runner already holds, only
  // those to append to its copy (no groups at all: nothing to append). A sliding-window group's
  // blocks that no new token can see may be -1 (returned to the pool).
  std::vector<std::vector<int32_t>> block_tables;
  LogitRows logits = LogitRows::Last;
  // -1, or (with LogitRows::Last only) the index into ForwardBatch::samples of its first logit row's
  // step: row r is sampled with samples[sample + r].
  int32_t sample = -1;
  // -1: the runner forgets the tables after this step. Else the runner keeps them under this id
  // across steps (the engine's running sequences), so a step carries only the blocks added since
  // the last, until ForwardBatch::released names the id.
  int64_t kept_id = -1;
  // Embeddings: the final-normed hidden state of every new token comes back (ForwardOutput::hidden).
  bool hidden = false;
  // With LogitRows::Last: how many of the last new tokens get logits. Speculative verification asks
  // for its last real token's and every draft's.
  int32_t last_rows = 1;
};

struct ForwardBatch {
  std::vector<SequenceInput> seqs;
  std::vector<SamplingStep> samples{};  // what SequenceInput::sample points at
  std::vector<int64_t> released{};      // kept ids to drop before this step (unknown ones are ignored)
};

struct ForwardOutput {
  int32_t vocab_size = 0;
  // [num_rows][vocab_size], only when a sequence that is not sampled has logit rows (tests and
  // tools read logits; the engine samples every row it asks for).
  std::vector<float> logits;
  std::vector<int32_t> first_row;       // per sequence: its first row in logits
  std::vector<int32_t> num_rows;        // per sequence: last_rows, 0, or its new token count (LogitRows)
  std::vector<SampledToken> tokens;     // per ForwardBatch::samples entry: the token it picked
  int32_t dim = 0;
  // Per sequence: [its new tokens][dim], when SequenceInput::hidden was set; else empty.
  std::vector<std::vector<float>> hidden;

  const float* row(int32_t seq, int32_t i = 0) const {
    return logits.data() + size_t(first_row[seq] + i) * vocab_size;
  }
};

}  // namespace flashserve
