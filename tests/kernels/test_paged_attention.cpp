#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/paged_attention.h"
#include "kernels/threads.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

struct SeqSpec {
  int32_t context_len;
  int32_t num_queries;  // the last num_queries positions are queries
};

// Random K/V/Q for a batch of sequences plus a paged cache of kv_type (f32 or f16) to hold them.
// Caches start as NaN (all bits set, NaN in either type), so reading a slot that was never written
// poisons the output. With f16, k and v hold the values the cache stores, for the reference.
struct Batch {
  KvLayout layout;
  int32_t num_heads;
  DType kv_type;
  std::vector<SeqSpec> specs;
  std::vector<std::vector<float>> k, v;  // per sequence: [context_len][num_kv_heads][head_dim]
  std::vector<std::vector<int32_t>> tables;
  std::vector<float> q, k_cache, v_cache;

  int64_t kv_row() const { return int64_t(layout.num_kv_heads) * layout.head_dim; }
  int64_t q_row() const { return int64_t(num_heads) * layout.head_dim; }

  Batch(std::mt19937& rng, KvLayout l, int32_t heads, std::vector<SeqSpec> s, bool shuffle, DType type = DType::F32)
      : layout(l), num_heads(heads), kv_type(type), specs(std::move(s)) {
    int64_t total_queries = 0;
    int32_t num_blocks = 3;  // spare blocks no table uses
    for (const SeqSpec& sp : specs) {
      k.push_back(random_floats(rng, size_t(sp.context_len * kv_row())));
      v.push_back(random_floats(rng, size_t(sp.context_len * kv_row())));
      total_queries += sp.num_queries;
      num_blocks += (sp.context_len + l.block_size - 1) / l.block_size;
    }
    q = random_floats(rng, size_t(total_queries * q_row()), -2.0f, 2.0f);
    // Same data whether shuffled or not: the block order draws from its own generator.
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    if (shuffle) std::shuffle(ids.begin(), ids.end(), std::mt19937(rng()));
    size_t next = 0;
    for (const SeqSpec& sp : specs) {
      const size_t n = size_t((sp.context_len + l.block_size - 1) / l.block_size);
      tables.emplace_back(ids.begin() + next, ids.begin() + next + n);
      next += n;
    }
    k_cache.resize(size_t(num_blocks * l.block_size * kv_row()));
    v_cache.resize(k_cache.size());
    poison_caches();
    if (kv_type == DType::F16) {
      for (auto* rows : {&k, &v})
        for (auto& seq : *rows)
          for (float& x : seq) x = fp16_to_fp32(fp32_to_fp16(x));
    }
  }

  void poison_caches() {
    std::memset(k_cache.data(), 0xff, k_cache.size() * 4);
    std::memset(v_cache.data(), 0xff, v_cache.size() * 4);
  }

  int32_t slot(size_t s, int32_t pos) const {
    return tables[s][size_t(pos / layout.block_size)] * layout.block_size + pos % layout.block_size;
  }

  // Writes positions [begin, end) of sequence s through kv_write.
  void write(size_t s, int32_t begin, int32_t end) {
    std::vector<int32_t> slots;
    for (int32_t p = begin; p < end; ++p) slots.push_back(slot(s, p));
    kv_write(layout, kv_type, k_cache.data(), v_cache.data(), &k[s][size_t(begin * kv_row())], &v[s][size_t(begin * kv_row())],
             slots.data(), end - begin);
  }

  std::vector<float> attend_all(float scale) {
    AttentionArrays seqs;
    for (size_t s = 0; s < specs.size(); ++s) {
      write(s, 0, specs[s].context_len);
      seqs.add(specs[s].num_queries, specs[s].context_len, tables[s]);
    }
    std::vector<float> out(q.size(), NAN);
    paged_attention(q.data(), k_cache.data(), v_cache.data(), kv_type, layout, seqs.batch(), num_heads, scale,
                    out.data());
    return out;
  }
};

void expect_matches_reference(const Batch& b, const std::vector<float>& out, float scale) {
  const int64_t hd = b.layout.head_dim, group = b.num_heads / b.layout.num_kv_heads;
  int64_t token = 0;
  for (size_t s = 0; s < b.specs.size(); ++s) {
    for (int32_t i = 0; i < b.specs[s].num_queries; ++i, ++token) {
      const int32_t pos = b.specs[s].context_len - b.specs[s].num_queries + i;
      for (int64_t h = 0; h < b.num_heads; ++h) {
        std::vector<const float*> krows, vrows;
        for (int32_t j = 0; j <= pos; ++j) {
          krows.push_back(&b.k[s][size_t(j * b.kv_row() + (h / group) * hd)]);
          vrows.push_back(&b.v[s][size_t(j * b.kv_row() + (h / group) * hd)]);
        }
        const float* qrow = &b.q[size_t(token * b.q_row() + h * hd)];
        const auto ref = ref_attention_row(qrow, krows, vrows, hd, scale);
        for (int64_t d = 0; d < hd; ++d)
          ASSERT_NEAR(out[size_t(token * b.q_row() + h * hd + d)], ref[d], 2e-6)
              << "seq " << s << " query " << i << " head " << h << " dim " << d;
      }
    }
  }
}

// A decode step, a whole prompt and a partial chunk in one ragged batch.
const std::vector<SeqSpec> kMixed = {{50, 1}, {20, 20}, {33, 5}};

TEST(PagedAttention, GqaMatchesReference) {
  for (DType t : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    std::mt19937 rng(41);
    const float scale = 1.0f / 8.0f;
    Batch b(rng, {16, 2, 64}, 4, kMixed, true, t);
    expect_matches_reference(b, b.attend_all(scale), scale);
  }
}

TEST(PagedAttention, OddShapesMatchReference) {
  std::mt19937 rng(42);
  // head_dim 20 and 40 leave partial vectors; block_size 1 and 5 put every few positions in a new block.
  Batch mqa(rng, {5, 1, 20}, 3, {{1, 1}, {13, 7}, {26, 2}}, true);
  expect_matches_reference(mqa, mqa.attend_all(0.3f), 0.3f);
  Batch mha(rng, {1, 2, 40}, 2, {{9, 9}, {4, 1}}, true);
  expect_matches_reference(mha, mha.attend_all(0.15f), 0.15f);
  Batch f16(rng, {5, 1, 20}, 3, {{13, 7}, {26, 2}}, true, DType::F16);
  expect_matches_reference(f16, f16.attend_all(0.3f), 0.3f);
}

TEST(PagedAttention, ShuffledBlocksEqualContiguousBitwise) {
  std::mt19937 rng_a(43), rng_b(43);
  Batch contiguous(rng_a, {8, 2, 64}, 4, kMixed, false);
  Batch shuffled(rng_b, {8, 2, 64}, 4, kMixed, true);
  ASSERT_NE(contiguous.tables, shuffled.tables);
  ASSERT_EQ(contiguous.q, shuffled.q);
  const auto a = contiguous.attend_all(0.125f), c = shuffled.attend_all(0.125f);
  ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
}

// A prompt prefilled in chunks (each chunk writing its K/V first) must give every query the same
// bits as one whole-prompt pass, whatever the thread count: chunks of 13, 16, 1 and 7 tokens cut the
// 16-token query tiles of the whole pass everywhere else, and the 1-token chunk is a decode step.
TEST(PagedAttention, ChunkedPrefillEqualsWholeBitwise) {
  for (DType t : {DType::F32, DType::F16}) {
    SCOPED_TRACE(dtype_name(t));
    std::mt19937 rng(44);
    const int32_t ctx = 37;
    Batch b(rng, {8, 2, 64}, 4, {{ctx, ctx}}, true, t);
    const auto whole = b.attend_all(0.125f);

    const int saved_threads = num_threads();
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      b.poison_caches();
      std::vector<float> chunked(b.q.size(), NAN);
      const int32_t bounds[] = {0, 13, 29, 30, ctx};
      for (int c = 0; c < 4; ++c) {
        const int32_t begin = bounds[c], end = bounds[c + 1];
        b.write(0, begin, end);
        AttentionArrays seq;
        seq.add(end - begin, end, b.tables[0]);
        const int64_t off = begin * b.q_row();
        paged_attention(b.q.data() + off, b.k_cache.data(), b.v_cache.data(), t, b.layout, seq.batch(), b.num_heads,
                        0.125f, chunked.data() + off);
      }
      ASSERT_EQ(std::memcmp(chunked.data(), whole.data(), whole.size() * 4), 0) << threads << " threads";
    }
    set_num_threads(saved_threads);
  }
}

// f16 rows are stored rounded to nearest even; any other type is refused.
TEST(PagedAttention, CpuCacheIsF32OrF16) {
  const KvLayout l{4, 1, 2};
  std::vector<uint16_t> kc(8), vc(8);
  const float k[] = {1.0f / 3.0f, 65519.0f}, v[] = {-2.5f, 1e-8f};
  const int32_t slot = 1;
  kv_write(l, DType::F16, kc.data(), vc.data(), k, v, &slot, 1);
  EXPECT_EQ(kc[2], fp32_to_fp16(k[0]));
  EXPECT_EQ(fp16_to_fp32(kc[3]), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(vc[2]), -2.5f);
  EXPECT_EQ(vc[3], 0u);  // below half the smallest subnormal
  EXPECT_THROW(kv_write(l, DType::BF16, kc.data(), vc.data(), k, v, &slot, 1), std::invalid_argument);
}

TEST(PagedAttention, KvWriteSkipsNegativeSlots) {
  const KvLayout l{4, 1, 2};
  std::vector<float> kc(8, 0.0f), vc(8, 0.0f);
  const float k[] = {1, 2, 3, 4}, v[] = {5, 6, 7, 8};
  const int32_t slots[] = {3, -1};
  kv_write(l, DType::F32, kc.data(), vc.data(), k, v, slots, 2);
  EXPECT_EQ(kc, (std::vector<float>{0, 0, 0, 0, 0, 0, 1, 2}));
  EXPECT_EQ(vc, (std::vector<float>{0, 0, 0, 0, 0, 0, 5, 6}));
}

}  // namespace
}  // namespace flashserve::test
