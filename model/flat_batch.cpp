#include "model/flat_batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace flashserve {
namespace {

void fail(size_t seq, const std::string& what) {
  throw std::invalid_argument("forward batch, sequence " + std::to_string(seq) + ": " + what);
}

void check_tokens(const SequenceInput& s, size_t i, const ModelConfig& cfg) {
  if (s.token_ids.empty()) fail(i, "no new tokens");
  if (s.num_computed_tokens < 0) fail(i, "negative num_computed_tokens");
  const int64_t total = int64_t(s.num_computed_tokens) + int64_t(s.token_ids.size());
  if (total > cfg.context_len) {
    fail(i, std::to_string(total) + " tokens exceed the context window of " + std::to_string(cfg.context_len));
  }
  for (int32_t t : s.token_ids) {
    if (t < 0 || t >= cfg.vocab_size) fail(i, "token id " + std::to_string(t) + " out of range");
  }
  if (s.logits == LogitRows::Last && (s.last_rows < 1 || size_t(s.last_rows) > s.token_ids.size())) {
    fail(i, "asks for logits of its last " + std::to_string(s.last_rows) + " of " + std::to_string(s.token_ids.size()) +
                " new tokens");
  }
}

// `blocks` go at entries from .. of a table; the first new token's window in `window` decides which
// may be -1 (nothing before that window is read).
void check_blocks(const std::vector<int32_t>& blocks, size_t from, const SequenceInput& s, size_t i, int32_t window,
                  int32_t block_size, int32_t num_blocks) {
  const int64_t first_seen = window > 0 ? std::max<int64_t>(0, s.num_computed_tokens - window + 1) : 0;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const int32_t block = blocks[j];
    if (block == -1 && int64_t(from + j + 1) * block_size <= first_seen) continue;
    if (block < 0 || block >= num_blocks) fail(i, "block " + std::to_string(block) + " out of range");
  }
}

// The sequence's whole tables: its own, or the kept copy grown by its new blocks.
const std::vector<std::vector<int32_t>>& tables_of(const SequenceInput& s, size_t i, KeptTables& kept,
                                                   int32_t block_size, int32_t num_blocks,
                                                   const std::vector<int32_t>& windows) {
  const bool nothing_new = s.kept_id >= 0 && s.block_tables.empty();
  if (s.block_tables.size() != windows.size() && !nothing_new) {
    fail(i, std::to_string(s.block_tables.size()) + " block tables for " + std::to_string(windows.size()) + " KV groups");
  }
  if (s.kept_id < 0) {
    for (size_t g = 0; g < windows.size(); ++g) check_blocks(s.block_tables[g], 0, s, i, windows[g], block_size, num_blocks);
    return s.block_tables;
  }
  KeptTables::Kept& k = kept.by_id[s.kept_id];
  if (k.last_step == kept.step) fail(i, "kept id " + std::to_string(s.kept_id) + " appears twice");
  k.last_step = kept.step;
  k.tables.resize(windows.size());
  if (nothing_new) return k.tables;
  for (size_t g = 0; g < windows.size(); ++g) {
    std::vector<int32_t>& table = k.tables[g];
    check_blocks(s.block_tables[g], table.size(), s, i, windows[g], block_size, num_blocks);
    table.insert(table.end(), s.block_tables[g].begin(), s.block_tables[g].end());
  }
  return k.tables;
}

}  // namespace

FlatBatch flatten(const ForwardBatch& batch, KeptTables& kept, const ModelConfig& cfg, int32_t block_size,
                  int32_t num_blocks, const std::vector<int32_t>& windows, ForwardOutput& out) {
  for (int64_t id : batch.released) kept.by_id.erase(id);
  ++kept.step;
  if (batch.seqs.empty()) throw std::invalid_argument("forward batch is empty");
  out.vocab_size = cfg.vocab_size;
  FlatBatch fb;
  const int32_t bs = block_size;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const SequenceInput& s = batch.seqs[i];
    check_tokens(s, i, cfg);
    const std::vector<std::vector<int32_t>>& tables = tables_of(s, i, kept, block_size, num_blocks, windows);
    const int32_t n = int32_t(s.token_ids.size());
    const int32_t context = s.num_computed_tokens + n;
    for (size_t g = 0; g < windows.size(); ++g) {
      if (int64_t(tables[g].size()) * block_size < context) {
        fail(i, "block table of " + std::to_string(tables[g].size()) + " blocks cannot hold " +
                    std::to_string(context) + " tokens");
      }
    }
    const int32_t start = int32_t(fb.token_ids.size());
    for (int32_t j = 0; j < n; ++j) {
      fb.token_ids.push_back(s.token_ids[j]);
      fb.positions.push_back(s.num_computed_tokens + j);
    }
    fb.seqs.push_back({start, n, context, tables.data()});
    out.first_row.push_back(int32_t(fb.logit_rows.size()));
    const int32_t first = s.logits == LogitRows::All ? 0 : s.logits == LogitRows::Last ? n - s.last_rows : n;
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
