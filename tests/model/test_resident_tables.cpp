// The block tables a runner keeps on its backend: each step uploads only the entries its new blocks
// brought, every sequence reads its own row, and rows outlive steps exactly as long as their ids.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "model/resident_tables.h"
#include "tests/util/forwarding_backend.h"

namespace flashserve::test {
namespace {

// The CPU backend, counting what goes up; `host` false makes it say it is not host memory, so the
// tables copy as they would to a GPU.
class CountingBackend final : public ForwardingBackend {
 public:
  explicit CountingBackend(bool host) : ForwardingBackend(kernels::make_cpu_backend()), host_(host) {}
  bool is_host() const override { return host_; }
  void copy_in(void* dst, const void* src, size_t bytes) override {
    ++copies;
    this->bytes += bytes;
    ForwardingBackend::copy_in(dst, src, bytes);
  }
  size_t copies = 0, bytes = 0;

 private:
  bool host_;
};

// One step: sequence i has kept id ids[i] and the whole tables tables[i], one per KV group.
struct Step {
  ForwardBatch batch;
  FlatBatch flat;
  std::vector<std::vector<std::vector<int32_t>>> tables;
};

Step grouped_step(const std::vector<int64_t>& ids, std::vector<std::vector<std::vector<int32_t>>> tables) {
  Step s;
  s.tables = std::move(tables);
  for (size_t i = 0; i < ids.size(); ++i) {
    SequenceInput in;
    in.kept_id = ids[i];
    s.batch.seqs.push_back(in);
    s.flat.seqs.push_back({0, 1, 1, s.tables[i].data()});
  }
  return s;
}

Step step(const std::vector<int64_t>& ids, const std::vector<std::vector<int32_t>>& tables) {
  std::vector<std::vector<std::vector<int32_t>>> grouped;
  for (const auto& t : tables) grouped.push_back({t});
  return grouped_step(ids, std::move(grouped));
}

std::vector<int32_t> row(const ResidentTables& t, int32_t r, size_t n) {
  const int32_t* p = t.table(0) + int64_t(r) * t.stride();
  return {p, p + n};
}

TEST(ResidentTables, AStepUploadsOnlyTheEntriesItsNewBlocksBrought) {
  CountingBackend be(true);
  ResidentTables t(be, 1, 8, 4);
  Step first = step({7, 8}, {{3, 4}, {5}});
  EXPECT_EQ(t.update(first.batch, first.flat), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(be.bytes, 3 * sizeof(int32_t));
  EXPECT_EQ(row(t, 0, 2), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(row(t, 1, 1), (std::vector<int32_t>{5}));

  be.bytes = be.copies = 0;
  Step same = step({8, 7}, {{5}, {3, 4}});
  EXPECT_EQ(t.update(same.batch, same.flat), (std::vector<int32_t>{1, 0})) << "each keeps its row, in any order";
  EXPECT_EQ(be.copies, 0u);

  Step grown = step({7, 8}, {{3, 4, 9}, {5}});
  t.update(grown.batch, grown.flat);
  EXPECT_EQ(be.bytes, sizeof(int32_t));
  EXPECT_EQ(row(t, 0, 3), (std::vector<int32_t>{3, 4, 9}));
}

TEST(ResidentTables, ReleasedAndOneStepRowsAreReusedAndRefilledWhole) {
  CountingBackend be(true);
  ResidentTables t(be, 1, 8, 4);
  Step first = step({7, 8}, {{3, 4}, {5}});
  t.update(first.batch, first.flat);
  t.release({7, 123});  // an unknown id is ignored
  Step next = step({9, -1, 8}, {{6, 1, 2}, {0}, {5}});
  EXPECT_EQ(t.update(next.batch, next.flat), (std::vector<int32_t>{0, 2, 1}));
  EXPECT_EQ(row(t, 0, 3), (std::vector<int32_t>{6, 1, 2})) << "the freed row, refilled for its new owner";
  EXPECT_EQ(row(t, 2, 1), (std::vector<int32_t>{0}));
  Step after = step({-1}, {{4, 4}});
  EXPECT_EQ(t.update(after.batch, after.flat), (std::vector<int32_t>{2})) << "the one-step row was freed";
  EXPECT_EQ(row(t, 2, 2), (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(t.moves(), 0);
}

TEST(ResidentTables, GrowingMovesTheTableAndKeepsEveryRow) {
  CountingBackend be(true);
  ResidentTables t(be, 2, 4, 1);  // two KV groups
  std::vector<int64_t> ids;
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<std::vector<int32_t>>> grouped;
  for (int32_t s = 0; s < 5; ++s) {
    ids.push_back(100 + s);
    tables.push_back({s, s + 10, s + 20});
    grouped.push_back({tables.back(), {s + 20, s + 10}});  // group 1: other blocks
  }
  Step st = grouped_step(ids, grouped);
  const std::vector<int32_t> rows = t.update(st.batch, st.flat);
  EXPECT_GE(t.moves(), 1);
  for (size_t s = 0; s < ids.size(); ++s) {
    EXPECT_EQ(row(t, rows[s], 3), tables[s]) << s;
    const int32_t* g1 = t.table(1) + int64_t(rows[s]) * t.stride();
    EXPECT_EQ(std::vector<int32_t>(g1, g1 + 2), (std::vector<int32_t>{tables[s][2], tables[s][1]})) << s;
  }
}

// To a GPU each copy is a call: a step's scattered changes go up in at most four spans.
TEST(ResidentTables, ADeviceGetsAStepsChangesInFewCopies) {
  CountingBackend be(false);
  ResidentTables t(be, 1, 8, 16);
  std::vector<int64_t> ids;
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < 16; ++s) {
    ids.push_back(s);
    tables.push_back({s});
  }
  Step first = step(ids, tables);
  t.update(first.batch, first.flat);
  be.copies = 0;
  for (int32_t s = 0; s < 16; s += 2) tables[size_t(s)].push_back(100 + s);  // every other row gains a block
  Step next = step(ids, tables);
  const std::vector<int32_t> rows = t.update(next.batch, next.flat);
  EXPECT_LE(be.copies, 4u);
  EXPECT_GE(be.copies, 1u);
  for (size_t s = 0; s < ids.size(); ++s) EXPECT_EQ(row(t, rows[s], tables[s].size()), tables[s]) << s;
}

}  // namespace
}  // namespace flashserve::test
