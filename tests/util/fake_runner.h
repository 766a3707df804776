// A stand-in model for scheduler tests. Its "KV cache" stores each token id in the slot the batch
// plan gives it, and its logits are a function of the whole context read back through the block
// table -- so a wrong block table, a bad prefix-cache hit or a lost block changes the output, and
// reading a slot nobody wrote throws.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>
#include "model/model_runner.h"

namespace flashserve::test {

class FakeRunner : public ModelRunner {
 public:
  // Logits favour byte tokens 0..255, so text decodes with the tiny model's vocabulary. Tokens
  // are picked with the CPU sampling op, as a real runner on the CPU does.
  // `windows`: its KV groups, as kv_group_windows() reports them (0: full attention); each group
  // reads back only the positions its window sees.
  FakeRunner(int32_t vocab_size, int32_t num_blocks, int32_t block_size, int32_t context_len,
             std::vector<int32_t> windows = {0});

  int32_t vocab_size() const override { return vocab_; }
  int32_t context_len() const override { return context_len_; }
  int32_t num_kv_blocks() const override { return num_blocks_; }
  int32_t block_size() const override { return block_size_; }
  std::vector<int32_t> kv_group_windows() const override { return windows_; }
  ForwardOutput forward(const ForwardBatch& batch) override;

  // Speculative decoding tests: with a period p > 0, the favourite token of most positions is the
  // one p positions back (read through the cache too), so the output repeats text a draft can
  // guess; the rest keep the context hash's favourite, so some drafts are rejected.
  void set_copy_period(int32_t period) { copy_period_ = period; }

  int64_t num_forward_calls() const { return calls_; }
  int64_t num_tokens_computed() const { return tokens_computed_; }
  int32_t max_batch_seqs() const { return max_seqs_; }
  size_t num_kept_tables() const { return kept_.size(); }

 private:
  using Tables = std::vector<std::vector<int32_t>>;  // [group][block index]
  const Tables& tables_of(const SequenceInput& s);
  void logits_for(const Tables& tables, int32_t pos, float* out);
  int32_t& slot(const Tables& tables, size_t group, int32_t pos);

  int32_t vocab_, num_blocks_, block_size_, context_len_;
  std::vector<int32_t> windows_;
  std::vector<std::vector<int32_t>> slots_;  // [group][slot]: token id, -1 if never written
  std::unordered_map<int64_t, Tables> kept_;  // by SequenceInput::kept_id
  int64_t calls_ = 0, tokens_computed_ = 0;
  int32_t max_seqs_ = 0;
  int32_t copy_period_ = 0;
};

}  // namespace flashserve::test
