// Logits -> next token for a batch of rows, each with its own sampling parameters. The rules, as
// vLLM's: logit bias; repetition penalty over prompt
// and output tokens; frequency and presence penalties over output tokens; tokens the row's mask
// forbids (constrained decoding) set to -inf, so nothing can raise them; then argmax (temperature
// 0: lowest id on ties), or softmax(logits / temperature), top-k, top-p of the top-k survivors' mass,
// min-p against the best token's probability, and a draw that walks the kept ids in ascending order
// until the cumulative probability passes uniform * (their total). The request's RNG stays on the
// host: the caller passes each row's uniform, so a GPU draw and a CPU draw pick the same token.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

struct CUstream_st;  // cudaStream_t

namespace flashserve::kernels {

// Per distinct token a row's history or bias touches.
struct TokenAdjust {
  int32_t token;
  int32_t output_count;  // occurrences among generated tokens (frequency / presence penalties)
  int32_t seen;          // 1 if in the prompt or the output (repetition penalty)
  float bias;            // logit_bias, 0 if none
};

struct SamplingRow {
  float temperature = 1.0f;  // 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  double uniform = 0.0;      // this step's draw in [0, 1); unused when greedy
  int32_t adjust_begin = 0;  // this row's entries: adjusts[adjust_begin .. adjust_end)
  int32_t adjust_end = 0;
  int32_t mask_row = -1;     // the row of `masks` with this row's allowed tokens; -1: every token
};

// Words per row of allowed-token bits: bit t % 32 of word t / 32 set = token t may be picked.
constexpr int32_t mask_words(int32_t vocab) { return (vocab + 31) / 32; }

// logits: [num_rows][vocab], used as scratch (overwritten). masks: [*][mask_words(vocab)], read at
// the rows' mask_row (null when no row has one); a mask must allow at least one token. tokens:
// [num_rows].
void sample_rows(float* logits, int32_t num_rows, int32_t vocab, const SamplingRow* rows,
                 const TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens);

// log p(token) under log_softmax(raw) -- the model's distribution, before bias, penalties and
// temperature (vLLM's "raw_logprobs") -- and the top_n best (token, logprob), best first, lower id
// on ties. A host function: runners bring the rows that ask for logprobs back to the host.
void token_logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n, float& logprob,
                    std::vector<std::pair<int32_t, float>>& top);

namespace cuda {
// The same contract on device pointers (CUDA builds only): only `tokens` need come back to the host.
void sample_rows(float* logits, int32_t num_rows, int32_t vocab, const SamplingRow* rows,
                 const TokenAdjust* adjusts, const uint32_t* masks, int32_t* tokens, CUstream_st* stream);
}  // namespace cuda

}  // namespace flashserve::kernels
