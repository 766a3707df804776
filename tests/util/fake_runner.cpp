#include "tests/util/fake_runner.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels/sampling.h"

namespace flashserve::test {

FakeRunner::FakeRunner(int32_t vocab_size, int32_t num_blocks, int32_t block_size, int32_t context_len,
                       std::vector<int32_t> windows)
    : vocab_(vocab_size),
      num_blocks_(num_blocks),
      block_size_(block_size),
      context_len_(context_len),
      windows_(std::move(windows)),
      slots_(windows_.size(), std::vector<int32_t>(size_t(num_blocks) * block_size, -1)) {}

int32_t& FakeRunner::slot(const Tables& tables, size_t group, int32_t pos) {
  const int32_t block = tables.at(group).at(size_t(pos / block_size_));
  if (block < 0 || block >= num_blocks_) throw std::invalid_argument("block " + std::to_string(block) + " out of range");
  return slots_[group][size_t(block) * block_size_ + pos % block_size_];
}

// A kept sequence's tables grow by the blocks each step sends; a wrong delta reads the wrong slots.
const FakeRunner::Tables& FakeRunner::tables_of(const SequenceInput& s) {
  const bool nothing_new = s.kept_id >= 0 && s.block_tables.empty();
  if (s.block_tables.size() != windows_.size() && !nothing_new) throw std::invalid_argument("one block table per KV group");
  if (s.kept_id < 0) return s.block_tables;
  Tables& kept = kept_[s.kept_id];
  kept.resize(windows_.size());
  for (size_t g = 0; g < s.block_tables.size(); ++g) {
    kept[g].insert(kept[g].end(), s.block_tables[g].begin(), s.block_tables[g].end());
  }
  return kept;
}

ForwardOutput FakeRunner::forward(const ForwardBatch& batch) {
  ++calls_;
  for (int64_t id : batch.released) kept_.erase(id);
  max_seqs_ = std::max(max_seqs_, int32_t(batch.seqs.size()));
  ForwardOutput out;
  out.vocab_size = vocab_;
  out.tokens.resize(batch.samples.size());
  for (const SequenceInput& s : batch.seqs) {
    const int32_t n = int32_t(s.token_ids.size());
    const Tables& tables = tables_of(s);
    for (size_t g = 0; g < windows_.size(); ++g) {
      if (int64_t(tables[g].size()) * block_size_ < s.num_computed_tokens + n) {
        throw std::invalid_argument("block table too short");
      }
      for (int32_t j = 0; j < n; ++j) slot(tables, g, s.num_computed_tokens + j) = s.token_ids[j];
    }
    tokens_computed_ += n;
    const int32_t rows = s.logits == LogitRows::All ? n : s.logits == LogitRows::Last ? s.last_rows : 0;
    out.first_row.push_back(int32_t(out.logits.size() / vocab_));
    out.num_rows.push_back(rows);
    for (int32_t r = n - rows; r < n; ++r) {
      out.logits.resize(out.logits.size() + vocab_);
      logits_for(tables, s.num_computed_tokens + r, out.logits.data() + out.logits.size() - vocab_);
    }
    for (int32_t k = 0; s.sample >= 0 && k < rows; ++k) {
      const SamplingStep& d = batch.samples.at(size_t(s.sample + k));
      const float* raw = out.row(int32_t(out.first_row.size() - 1), k);
      std::vector<float> row(raw, raw + vocab_);
      SampledToken& t = out.tokens.at(size_t(s.sample + k));
      kernels::SamplingRow params = d.row;
      params.mask_row = d.mask.empty() ? -1 : 0;
      kernels::sample_rows(row.data(), 1, vocab_, &params, d.adjusts.data(), d.mask.data(), &t.token);
      if (d.logprobs >= 0) kernels::token_logprobs(raw, vocab_, t.token, d.logprobs, t.logprob, t.top_logprobs);
    }
  }
  return out;
}

// A hash of what each group sees of the context 0..pos (as stored in the cache: all of it, or its
// window) picks a favourite byte token; every other token gets a smaller, context-dependent logit so
// that sampling has a real distribution.
void FakeRunner::logits_for(const Tables& tables, int32_t pos, float* out) {
  uint64_t h = 1469598103934665603ull;
  for (size_t g = 0; g < windows_.size(); ++g) {
    for (int32_t p = windows_[g] > 0 ? std::max(0, pos - windows_[g] + 1) : 0; p <= pos; ++p) {
      const int32_t tok = slot(tables, g, p);
      if (tok < 0) throw std::logic_error("read KV slot of position " + std::to_string(p) + " that was never written");
      h = (h ^ uint64_t(tok) ^ (uint64_t(p) << 32) ^ (uint64_t(g) << 48)) * 1099511628211ull;
    }
  }
  for (int32_t v = 0; v < vocab_; ++v) {
    out[v] = v < 256 ? float((h >> (v % 48)) & 7) * 0.25f : -10.0f;
  }
  const bool copies = copy_period_ > 0 && pos + 1 >= copy_period_ && h % 5 != 0;
  out[copies ? slot(tables, 0, pos + 1 - copy_period_) : int32_t((h >> 8) % 256)] = 5.0f;
}

}  // namespace flashserve::test
