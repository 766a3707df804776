#include "model/resident_tables.h"

#include <algorithm>
#include <limits>

namespace flashserve {
namespace {

// On a GPU each copy costs a call of microseconds whatever its size, so a step's changed entries
// go up in at most this many spans (unchanged entries between them ride along); on the host a copy
// is a memcpy of its bytes, so each run of changed entries goes alone.
constexpr size_t kDeviceCopiesPerStep = 4;

}  // namespace

ResidentTables::ResidentTables(kernels::Backend& be, int32_t groups, int32_t stride, int32_t rows)
    : be_(be), groups_(groups), stride_(stride), rows_(std::max(rows, 1)) {
  device_ = kernels::Buffer(be_, size_t(groups_) * rows_ * stride_ * sizeof(int32_t));
  host_.assign(size_t(groups_) * rows_ * stride_, 0);
  for (int32_t r = 0; r < rows_; ++r) free_.push(r);
}

void ResidentTables::release(const std::vector<int64_t>& ids) {
  for (int64_t id : ids) {
    auto it = kept_.find(id);
    if (it == kept_.end()) continue;
    free_.push(it->second.row);
    kept_.erase(it);
  }
}

int32_t ResidentTables::take_free_row() {
  if (free_.empty()) grow();
  const int32_t row = free_.top();
  free_.pop();
  return row;
}

ResidentTables::Row& ResidentTables::row_for(int64_t kept_id) {
  auto it = kept_.find(kept_id);
  if (it != kept_.end()) return it->second;
  return kept_.emplace(kept_id, Row{take_free_row(), std::vector<int32_t>(size_t(groups_), 0)}).first->second;
}

// Twice the rows; what the old table held moves to the new layout and goes up whole.
void ResidentTables::grow() {
  const int32_t rows = rows_ * 2;
  const size_t per_row = size_t(stride_);
  std::vector<int32_t> host(size_t(groups_) * rows * per_row, 0);
  for (int32_t g = 0; g < groups_; ++g) {
    const auto from = host_.begin() + ptrdiff_t(size_t(g) * rows_ * per_row);
    std::copy(from, from + ptrdiff_t(size_t(rows_) * per_row), host.begin() + ptrdiff_t(size_t(g) * rows * per_row));
  }
  kernels::Buffer device(be_, host.size() * sizeof(int32_t));  // may throw: nothing changed yet
  host_ = std::move(host);
  device_ = std::move(device);
  for (int32_t r = rows_; r < rows; ++r) free_.push(r);
  rows_ = rows;
  dirty_.assign(1, {0, int64_t(host_.size())});
  ++moves_;
}

void ResidentTables::write(Row& r, int32_t group, const std::vector<int32_t>& table) {
  const int32_t from = r.sent[group];
  const int32_t to = int32_t(std::min<size_t>(table.size(), size_t(stride_)));
  if (to <= from) return;
  const int64_t at = (int64_t(group) * rows_ + r.row) * stride_;
  std::copy(table.begin() + from, table.begin() + to, host_.begin() + at + from);
  dirty_.push_back({at + from, at + to});
  r.sent[group] = to;
}

// The changed spans, merged across the smallest gaps until at most the backend's copies remain.
void ResidentTables::upload() {
  if (dirty_.empty()) return;
  std::sort(dirty_.begin(), dirty_.end());
  std::vector<std::pair<int64_t, int64_t>> spans{dirty_.front()};
  for (size_t i = 1; i < dirty_.size(); ++i) {
    if (dirty_[i].first <= spans.back().second) {
      spans.back().second = std::max(spans.back().second, dirty_[i].second);
    } else {
      spans.push_back(dirty_[i]);
    }
  }
  dirty_.clear();
  const size_t most = be_.is_host() ? std::numeric_limits<size_t>::max() : kDeviceCopiesPerStep;
  if (spans.size() > most) {
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < spans.size(); ++i) gaps.push_back(spans[i].first - spans[i - 1].second);
    std::nth_element(gaps.begin(), gaps.begin() + ptrdiff_t(spans.size() - most - 1), gaps.end());
    const int64_t bridged = gaps[spans.size() - most - 1];  // gaps up to this one are crossed
    std::vector<std::pair<int64_t, int64_t>> merged{spans.front()};
    for (size_t i = 1; i < spans.size(); ++i) {
      if (spans[i].first - merged.back().second <= bridged) {
        merged.back().second = spans[i].second;
      } else {
        merged.push_back(spans[i]);
      }
    }
    spans = std::move(merged);
  }
  for (const auto& [begin, end] : spans) {
    be_.copy_in(device_.get<int32_t>() + begin, host_.data() + begin, size_t(end - begin) * sizeof(int32_t));
  }
}

std::vector<int32_t> ResidentTables::update(const ForwardBatch& batch, const FlatBatch& fb) {
  for (const Row& r : one_step_) free_.push(r.row);
  one_step_.clear();
  std::vector<int32_t> rows(fb.seqs.size());
  for (size_t i = 0; i < fb.seqs.size(); ++i) {
    const int64_t id = batch.seqs[i].kept_id;
    if (id < 0) one_step_.push_back(Row{take_free_row(), std::vector<int32_t>(size_t(groups_), 0)});
    Row& r = id >= 0 ? row_for(id) : one_step_.back();
    for (int32_t g = 0; g < groups_; ++g) write(r, g, fb.seqs[i].block_tables[g]);
    rows[i] = r.row;
  }
  upload();
  return rows;
}

}  // namespace flashserve
