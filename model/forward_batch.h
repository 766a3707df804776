// What the model executes in one step: a ragged batch of sequences, each adding some new tokens
// (a whole prompt, a chunk of one, or a single decode token) on top of what its KV cache holds.
// Prefill and decode are the same thing here: num_computed_tokens catching up to the token count.
#pragma once
#include <cstdint>
#include <vector>
#include "kernels/sampling.h"

namespace flashserve {

// Which of a sequence's new tokens get logits: the LM head is the largest matmul, so a prefill
// chunk that does not reach the end of the prompt asks for none.
enum class LogitRows { Last, All, None };

// A sequence whose next token the runner picks itself (runners that samples_on_device()): the
// request's parameters, this step's uniform and the tokens its bias and history touch, so only the
// token crosses back to the host instead of a vocabulary-sized row of logits.
struct DeviceSampling {
  kernels::SamplingRow row;  // adjust_begin / adjust_end index `adjusts`
  std::vector<kernels::TokenAdjust> adjusts;
};

struct SequenceInput {
  int32_t num_computed_tokens = 0;  // tokens of this sequence already in the KV cache
  std::vector<int32_t> token_ids;   // new tokens; at positions num_computed_tokens, +1, ...
  std::vector<int32_t> block_table; // KV blocks for positions 0 .. num_computed_tokens + new - 1
  LogitRows logits = LogitRows::Last;
  int32_t sample = -1;  // index into ForwardBatch::samples (with LogitRows::Last only), or -1
};

struct ForwardBatch {
  std::vector<SequenceInput> seqs;
  std::vector<DeviceSampling> samples{};  // what SequenceInput::sample points at
};

struct ForwardOutput {
  int32_t vocab_size = 0;
  std::vector<float> logits;            // [num_rows][vocab_size]
  std::vector<int32_t> first_row;       // per sequence: its first row in logits
  std::vector<int32_t> num_rows;        // per sequence: 1, 0, or its new token count (LogitRows)
  // Per sequence: the token picked on the device (SequenceInput::sample), else -1. The logits of
  // such a sequence's row need not come back: read only rows of sequences sampled on the host.
  std::vector<int32_t> sampled;

  const float* row(int32_t seq, int32_t i = 0) const {
    return logits.data() + size_t(first_row[seq] + i) * vocab_size;
  }
};

}  // namespace flashserve
