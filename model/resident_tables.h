// The block tables where attention reads them: one row per sequence in the backend's memory (on a
// GPU, device memory), kept across steps for the sequences the runner keeps (SequenceInput::
// kept_id), so a step uploads only the entries its new blocks brought -- a decode step, a handful
// of rows every block_size steps -- instead of every sequence's whole table. Attention finds a
// sequence's row through AttentionBatch::table_rows.
#pragma once
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>
#include <vector>
#include "kernels/backend.h"
#include "model/flat_batch.h"

namespace flashserve {

class ResidentTables {
 public:
  // `stride`: entries of a row (the context window's blocks); `rows`: rows to start with (more are
  // made as a step needs them).
  ResidentTables(kernels::Backend& be, int32_t groups, int32_t stride, int32_t rows);

  // Frees the rows of `ids` (kept ids; unknown ones are ignored).
  void release(const std::vector<int64_t>& ids);
  // Gives each sequence of the step its row -- a kept id the one it had, else a row for this step
  // only (freed by the next update) -- and queues the upload of every entry the backend does not
  // hold yet. Returns the rows in batch order. Growing the table moves it: `moves()` then counts
  // one more, and what was recorded with the old address must be dropped.
  std::vector<int32_t> update(const ForwardBatch& batch, const FlatBatch& fb);

  const int32_t* table(int32_t group) const { return device_.get<int32_t>() + size_t(group) * rows_ * stride_; }
  int32_t stride() const { return stride_; }
  int64_t moves() const { return moves_; }

 private:
  struct Row {
    int32_t row;
    std::vector<int32_t> sent;  // [group]: entries the backend holds
  };
  Row& row_for(int64_t kept_id);
  int32_t take_free_row();
  void grow();
  void write(Row& r, int32_t group, const std::vector<int32_t>& table);
  void upload();

  kernels::Backend& be_;
  const int32_t groups_, stride_;
  int32_t rows_;
  kernels::Buffer device_;
  std::vector<int32_t> host_;  // what device_ holds, [group][row][stride]
  std::unordered_map<int64_t, Row> kept_;
  std::vector<Row> one_step_;
  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> free_;  // the lowest row goes first
  std::vector<std::pair<int64_t, int64_t>> dirty_;  // [begin, end) of host_ to upload
  int64_t moves_ = 0;
};

}  // namespace flashserve
