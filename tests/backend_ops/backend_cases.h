// Helpers the backend op tests share: host data on a backend, and one attention case.
#pragma once
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {

using kernels::Backend;
using kernels::Buffer;

// Every weight format the kernels read.
inline constexpr DType kAllTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0,   DType::Q4_1,  DType::Q5_0,
                                      DType::Q5_1, DType::Q8_0, DType::Q2_K, DType::Q3_K,   DType::Q4_K,  DType::Q5_K,
                                      DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS};

// Host data copied onto a backend, and back.
template <typename T>
struct On {
  On(Backend& b, const std::vector<T>& host) : be(b), buf(b, std::max<size_t>(1, host.size()) * sizeof(T)), n(host.size()) {
    if (n) be.copy_in(buf.get(), host.data(), n * sizeof(T));
  }
  On(Backend& b, size_t count) : be(b), buf(b, std::max<size_t>(1, count) * sizeof(T)), n(count) {}
  T* get() const { return buf.template get<T>(); }
  std::vector<T> host() const {
    std::vector<T> out(n);
    if (n) be.copy_out(out.data(), buf.get(), n * sizeof(T));
    be.synchronize();
    return out;
  }
  Backend& be;
  Buffer buf;
  size_t n;
};

// Weights as a model file holds them: quantized from random values (float types stored as is).
inline std::vector<uint8_t> weight_rows(std::mt19937& rng, DType t, int64_t rows, int64_t cols) {
  const auto values = random_floats(rng, size_t(rows * cols));
  std::vector<uint8_t> w(size_t(rows) * kernels::row_bytes(t, cols));
  for (int64_t r = 0; r < rows; ++r) {
    kernels::quantize_row(t, values.data() + r * cols, w.data() + r * kernels::row_bytes(t, cols), cols);
  }
  return w;
}

struct SeqSpec {
  int32_t context_len, num_queries;
};

// What attention wrote, the f64 reference over the K/V values the cache can hold, and the f64
// reference over the K/V values as computed (what a lossy cache type costs).
struct AttentionRun {
  std::vector<float> got;
  std::vector<double> want;
  std::vector<double> exact;
};

// Rows of n values as a cache of type t holds them: rounded per value, or per block of 32 (q8_0).
inline std::vector<float> stored_rows(DType t, std::vector<float> x, int64_t n) {
  std::vector<uint8_t> row(kernels::row_bytes(t, n));
  for (size_t r = 0; r < x.size(); r += size_t(n)) {
    kernels::quantize_row(t, x.data() + r, row.data(), n);
    kernels::dequantize_row(t, row.data(), x.data() + r, n);
  }
  return x;
}

// kv_write of every sequence's K/V (random, from rng), then attention of its last num_queries
// positions; resident_rows: the tables in rows of their own (AttentionArrays::resident_batch).
inline AttentionRun run_attention(Backend& be, DType kv_type, int64_t hd, int32_t heads, int32_t kv_heads,
                                  const std::vector<SeqSpec>& specs, std::mt19937& rng, int32_t window = 0,
                                  bool resident_rows = false) {
  const kernels::KvLayout layout{16, kv_heads, int32_t(hd)};
  const int64_t kv_row = kv_heads * hd, q_row = heads * hd;
  AttentionArrays arrays;
  std::vector<float> k, v, q;
  std::vector<int32_t> slots;
  int32_t next_block = 0, tokens = 0;
  std::vector<int32_t> first_kv;  // per sequence: its first row in k / v
  for (const SeqSpec& s : specs) {
    std::vector<int32_t> table;
    for (int32_t b = 0; b < (s.context_len + 15) / 16; ++b) table.push_back(next_block++);
    first_kv.push_back(int32_t(k.size() / kv_row));
    slots.resize(slots.size() + size_t(s.context_len));
    const auto kk = random_floats(rng, size_t(s.context_len * kv_row)), vv = random_floats(rng, size_t(s.context_len * kv_row));
    k.insert(k.end(), kk.begin(), kk.end());
    v.insert(v.end(), vv.begin(), vv.end());
    const auto qq = random_floats(rng, size_t(s.num_queries * q_row), -2.0f, 2.0f);
    q.insert(q.end(), qq.begin(), qq.end());
    arrays.add(s.num_queries, s.context_len, table);
    tokens += s.num_queries;
  }
  // Blocks scattered over the pool: table entries reversed, so no sequence's blocks are in order.
  for (auto& t : arrays.tables) for (int32_t& b : t) b = next_block - 1 - b;
  for (size_t i = 0, s = 0, p = 0; i < slots.size(); ++i, ++p) {
    if (p == size_t(specs[s].context_len)) ++s, p = 0;
    slots[i] = arrays.tables[s][p / 16] * 16 + int32_t(p % 16);
  }
  const size_t pool = size_t(next_block) * 16 * size_t(kv_heads) * kernels::row_bytes(kv_type, hd);
  Buffer kc(be, pool), vc(be, pool);
  const kernels::KvCacheView kv{kc.get(), vc.get(), kv_type, layout};
  On<float> dk(be, k), dv(be, v), dq(be, q), out(be, q.size());
  On<int32_t> dslots(be, slots);
  be.kv_write(kv, dk.get(), dv.get(), dslots.get(), int64_t(slots.size()));
  kernels::AttentionBatch batch = resident_rows ? arrays.resident_batch() : arrays.batch();
  On<int32_t> qs(be, arrays.query_start), lens(be, arrays.context_lens), tables(be, arrays.flat_tables);
  On<int32_t> table_rows(be, arrays.table_rows);
  batch.window = window;
  batch.query_start = qs.get();
  batch.context_lens = lens.get();
  batch.block_tables = tables.get();
  if (resident_rows) batch.table_rows = table_rows.get();
  const float scale = 1.0f / std::sqrt(float(hd));
  be.attention(dq.get(), kv, batch, heads, scale, out.get());

  auto reference = [&](const std::vector<float>& kx, const std::vector<float>& vx) {
    std::vector<double> want;
    int64_t row = 0;
    for (size_t s = 0; s < specs.size(); ++s) {
      for (int32_t i = 0; i < specs[s].num_queries; ++i, ++row) {
        const int32_t pos = specs[s].context_len - specs[s].num_queries + i;
        for (int32_t h = 0; h < heads; ++h) {
          std::vector<const float*> krows, vrows;
          for (int32_t j = window > 0 ? std::max(0, pos - window + 1) : 0; j <= pos; ++j) {
            krows.push_back(&kx[size_t((first_kv[s] + j) * kv_row + (h / (heads / kv_heads)) * hd)]);
            vrows.push_back(&vx[size_t((first_kv[s] + j) * kv_row + (h / (heads / kv_heads)) * hd)]);
          }
          const auto r = ref_attention_row(&q[size_t(row * q_row + h * hd)], krows, vrows, hd, scale);
          want.insert(want.end(), r.begin(), r.end());
        }
      }
    }
    return want;
  };
  return {out.host(), reference(stored_rows(kv_type, k, hd), stored_rows(kv_type, v, hd)), reference(k, v)};
}

}  // namespace flashserve::test
