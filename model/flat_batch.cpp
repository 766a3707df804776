#include "model/flat_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace flashserve {
namespace {

void fail(size_t seq, const std::string& what) {
  throw std::invalid_argument("forward batch, sequence " + std::to_string(seq) + ": " + what);
}

void check_sequence(const SequenceInput& s, size_t i, const ModelConfig& cfg, int32_t block_size, int32_t num_blocks,
                    const std::vector<int32_t>& windows) {
  if (s.token_ids.empty()) fail(i, "no new tokens");
  if (s.num_computed_tokens < 0) fail(i, "negative num_computed_tokens");
  const int64_t total = int64_t(s.num_computed_tokens) + int64_t(s.token_ids.size());
  if (total > cfg.context_len) {
    fail(i, std::to_string(total) + " tokens exceed the context window of " + std::to_string(cfg.context_len));
  }
  if (s.block_tables.size() != windows.size()) {
    fail(i, std::to_string(s.block_tables.size()) + " block tables for " + std::to_string(windows.size()) + " KV groups");
  }
  for (size_t g = 0; g < windows.size(); ++g) {
    const std::vector<int32_t>& table = s.block_tables[g];
    if (int64_t(table.size()) * block_size < total) {
      fail(i, "block table of " + std::to_string(table.size()) + " blocks cannot hold " + std::to_string(total) +
                  " tokens");
    }
    // The first new token's window starts here; nothing before it is read.
    const int64_t first_seen = windows[g] > 0 ? std::max<int64_t>(0, s.num_computed_tokens - windows[g] + 1) : 0;
    for (int64_t b = 0; b < int64_t(table.size()); ++b) {
      const int32_t block = table[size_t(b)];
      if (block == -1 && (b + 1) * block_size <= first_seen) continue;
      if (block < 0 || block >= num_blocks) fail(i, "block " + std::to_string(block) + " out of range");
    }
  }
  for (int32_t t : s.token_ids) {
    if (t < 0 || t >= cfg.vocab_size) fail(i, "token id " + std::to_string(t) + " out of range");
  }
}

}  // namespace

FlatBatch flatten(const ForwardBatch& batch, const ModelConfig& cfg, int32_t block_size, int32_t num_blocks,
                  const std::vector<int32_t>& windows, ForwardOutput& out) {
  if (batch.seqs.empty()) throw std::invalid_argument("forward batch is empty");
  out.vocab_size = cfg.vocab_size;
  FlatBatch fb;
  const int32_t bs = block_size;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SequenceInput& s = batch.seqs[i];
    check_sequence(s, i, cfg, block_size, num_blocks, windows);
    const int32_t start = int32_t(fb.token_ids.size());
    const int32_t n = int32_t(s.token_ids.size());
    for (int32_t j = 0; j < n; ++j) {
      fb.token_ids.push_back(s.token_ids[j]);
      fb.positions.push_back(s.num_computed_tokens + j);
    }
    fb.seqs.push_back({start, n, s.num_computed_tokens + n, s.block_tables.data()});
    out.first_row.push_back(int32_t(fb.logit_rows.size()));
    const int32_t first = s.logits == LogitRows::All ? 0 : s.logits == LogitRows::Last ? n - 1 : n;
    out.num_rows.push_back(n - first);
    for (int32_t j = first; j < n; ++j) fb.logit_rows.push_back(start + j);
  }
  const size_t tokens = fb.token_ids.size();
  fb.slot_mapping.resize(windows.size() * tokens);
  for (size_t g = 0; g < windows.size(); ++g) {
    for (const SeqSpan& a : fb.seqs) {
      const std::vector<int32_t>& table = a.block_tables[g];
      for (int32_t j = 0; j < a.num_queries; ++j) {
        const int32_t pos = fb.positions[size_t(a.query_start + j)];
        fb.slot_mapping[g * tokens + size_t(a.query_start + j)] = table[size_t(pos / bs)] * bs + pos % bs;
      }
    }
  }
  return fb;
}

}  // namespace flashserve
