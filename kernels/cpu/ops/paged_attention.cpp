#include "kernels/paged_attention.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/parallel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "kernels/cpu/block_codec.h"
#include "kernels/cpu/simd.h"
#include "kernels/threads.h"

namespace flashserve::kernels::FLASHSERVE_ISA {
namespace {

using namespace simd;

// Vectors of an output row accumulated in registers per pass over a block's V rows: 64 floats.
constexpr int kOutVecs = 4;

// K rows whose dot products with a query are reduced together: as many accumulators as leave room
// in the register file (an AVX2 vector is two registers).
#if defined(FLASHSERVE_AVX2)
constexpr int kRowsAtOnce = 4;
#else
constexpr int kRowsAtOnce = 8;
#endif

// Values of the cache a T holds: one, or a q8_0 block's 32.
template <class T>
constexpr int64_t kValuesPer = std::is_same_v<T, BlockQ8_0> ? 32 : 1;

// One KV head's view of a sequence's paged cache.
struct KvView {
  const KvLayout& layout;
  const int32_t* block_table;
  int32_t kv_head;

  int64_t stride() const { return int64_t(layout.num_kv_heads) * layout.head_dim; }

  // Calls f(j, rows, base) for each run of positions first..n-1 that one cache block holds:
  // positions first + j .. first + j + rows - 1, position first + j + r at base + r * stride()
  // values (a q8_0 cache's T holds 32 of them). No division per position.
  template <class T, class F>
  void for_each_block(const T* cache, int32_t first, int32_t n, F&& f) const {
    const int32_t bs = layout.block_size;
    for (int32_t p = first; p < n;) {
      const int32_t off = p % bs, rows = std::min(bs - off, n - p);
      const int64_t slot = int64_t(block_table[p / bs]) * bs + off;
      f(p - first, rows, cache + (slot * stride() + int64_t(kv_head) * layout.head_dim) / kValuesPer<T>);
      p += rows;
    }
  }
};

// The query heads sharing one KV head, for a run of consecutive tokens of one sequence (one token
// in decode): token i's head h row at q + i * token_stride + h * head_dim (out likewise). Token i
// attends positions first .. end0 + i - 1. The tile's tokens read each K and V row once, from L1,
// instead of once each from wherever the cache is: what keeps a long prompt's memory traffic from
// growing with the square of its length.
struct QueryTile {
  const float* q;
  float* out;
  int32_t heads, tokens;
  int64_t token_stride;
  int32_t end0;

  int32_t rows() const { return heads * tokens; }
  // Query row x = i * heads + h.
  const float* q_row(int32_t x, int64_t hd) const { return q + (x / heads) * token_stride + (x % heads) * hd; }
  float* out_row(int32_t x, int64_t hd) const { return out + (x / heads) * token_stride + (x % heads) * hd; }
  int32_t end_of(int32_t x) const { return end0 + x / heads; }
};

// The cache elements p[0 .. n-1] (fewer than W: zero-filled; none: zeros) as floats. f16 converts
// exactly, so an f16 cache only changes what kv_write stored.
inline V load_kv(const float* p, int64_t n) { return load_upto(p, n); }
inline V load_kv(const uint16_t* p, int64_t n) {
#if defined(FLASHSERVE_AVX512)
  if (n >= W) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes(int(n)), p));
#elif defined(FLASHSERVE_AVX2)
  auto convert = [](const uint16_t* h) {
    const auto* v = reinterpret_cast<const __m128i*>(h);
    return V{_mm256_cvtph_ps(_mm_loadu_si128(v)), _mm256_cvtph_ps(_mm_loadu_si128(v + 1))};
  };
  if (n >= W) return convert(p);
  uint16_t part[W] = {};
  std::copy(p, p + std::max<int64_t>(n, 0), part);
  return convert(part);
#else
  return each([&](int i) { return i < n ? codec::half_to_float(p[i]) : 0.0f; });
#endif
}

// An fp8 (E4M3) cache's p[0 .. n-1] likewise, exactly: its seven magnitude bits at an f16's bits
// 7..13 make the f16 of x * 2^-8 (exponent biases 7 and 15; subnormals line up too), which
// converts exactly and is scaled back by 2^8. The NaN code becomes f16's NaN.
#if defined(FLASHSERVE_AVX512) || defined(FLASHSERVE_AVX2)
inline __m256i e4m3_as_scaled_f16(const __m128i bytes) {
  const __m256i b = _mm256_cvtepu8_epi16(bytes);
  const __m256i mag = _mm256_and_si256(b, _mm256_set1_epi16(0x7f));
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  const __m256i h = _mm256_or_si256(_mm256_slli_epi16(mag, 7), sign);
  return _mm256_blendv_epi8(h, _mm256_set1_epi16(0x7e00), _mm256_cmpeq_epi16(mag, _mm256_set1_epi16(0x7f)));
}
#endif
inline V load_kv(const uint8_t* p, int64_t n) {
#if defined(FLASHSERVE_AVX512)
  const __m128i bytes = n >= W ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : _mm_maskz_loadu_epi8(lanes(int(n)), p);
  return _mm512_mul_ps(_mm512_cvtph_ps(e4m3_as_scaled_f16(bytes)), _mm512_set1_ps(256.0f));
#elif defined(FLASHSERVE_AVX2)
  uint8_t part[W] = {};
  if (n < W) std::copy(p, p + std::max<int64_t>(n, 0), part);
  const __m256i h = e4m3_as_scaled_f16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(n >= W ? p : part)));
  const __m256 scale = _mm256_set1_ps(256.0f);
  return V{_mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), scale),
           _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), scale)};
#else
  return each([&](int i) { return i < n ? codec::e4m3_to_float(p[i]) : 0.0f; });
#endif
}

// An f16 or fp8 cache's float_rows asks for row r + kPrefetchRows while it converts row r. A
// head's rows are num_kv_heads * head_dim elements apart, and with a 64-byte fp8 row (SmolLM2: 3
// heads of 64) the 2-core Zen 5 fetched them one miss at a time: decode at 4,096 cached tokens took
// 26.0-28.6 ms a token with an fp8 cache, 10.9-11.1 with this (f16 within noise; q8_0 showed no
// gain and is left as it was; bench/results/kv-cache-fp8-2026-12-07-60f64cd). A prefetch changes
// no bit, and one past the pool is dropped, never faults.
constexpr int32_t kPrefetchRows = 4;
inline void prefetch_row(const void* row, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(static_cast<const char*>(row) + o);
}

// A thread's buffers, reused across calls. Wrapped in a type of this copy's namespace: a
// thread_local std::vector<float> would make its destructor a weak symbol the copies share.
struct Scratch {
  std::vector<float> scores;
  std::vector<float> rows;  // a cache block's rows as floats
};

// A cache block's run of rows (row r at base + r * stride) as floats, row r at p + r * stride: an
// f32 cache's where they are, an f16 cache's converted once into the scratch rows (exactly, as
// load_kv does) instead of once for every query row of the tile. On a 2-core Zen 4 (AVX2 alone),
// BM_PagedAttention/f16, best of 15 alternating: a 512-token prefill 8413 -> 6181 us, decode of 8
// sequences at 1024 677 -> 509; in the 1B-shaped Q4_K_M prefill of 512 tokens attention went from
// 11.7% of the time to 9.1% (perf).
struct FloatRows {
  const float* p;
  int64_t stride;
};
inline FloatRows float_rows(const float* base, int32_t, int64_t stride, int64_t, Scratch&) { return {base, stride}; }
// An f16 or fp8 cache's (T = uint16_t, uint8_t).
template <class T>
FloatRows float_rows(const T* base, int32_t rows, int64_t stride, int64_t hd, Scratch& scratch) {
  scratch.rows.resize(std::max(scratch.rows.size(), size_t(rows) * size_t(hd)));
  float* out = scratch.rows.data();
  for (int32_t r = 0; r < rows; ++r) {
    prefetch_row(base + (r + kPrefetchRows) * stride, size_t(hd) * sizeof(T));
    for (int64_t c = 0; c < hd; c += W) store_upto(out + r * hd + c, load_kv(base + r * stride + c, hd - c), hd - c);
  }
  return {out, hd};
}
// A q8_0 cache's rows decoded once for the tile, as the f16 cache's: d * q is exact in f32 (an f16
// scale times an 8-bit integer), so the attention math after it is the f32 cache's.
inline FloatRows float_rows(const BlockQ8_0* base, int32_t rows, int64_t stride, int64_t hd, Scratch& scratch) {
  scratch.rows.resize(std::max(scratch.rows.size(), size_t(rows) * size_t(hd)));
  float* out = scratch.rows.data();
  for (int32_t r = 0; r < rows; ++r) {
    const BlockQ8_0* row = base + r * stride / 32;
    for (int64_t c = 0; c < hd / 32; ++c) {
      const float d = codec::half_to_float(row[c].d);
      float* o = out + r * hd + c * 32;
      for (int i = 0; i < 32; ++i) o[i] = d * float(row[c].qs[i]);
    }
  }
  return {out, hd};
}

// out[j] = scale * reduce_add(acc[j]) for j < count.
void store_sums(const V (&acc)[kRowsAtOnce], float scale, float* out, int count) {
  float sums[kRowsAtOnce];
  reduce_add_many(acc, kRowsAtOnce, sums);
  for (int j = 0; j < count; ++j) out[j] = scale * sums[j];
}

// scores[x * n + j] = scale * q_x . K_{first + j} for each query row x and j < its end - first,
// n = the last token's end - first; each block's K rows are read once for the whole tile,
// kRowsAtOnce at a time (a shorter run repeats its last row and drops it). A row's dot products
// do not depend on the rows beside them, so a token's scores are the same bits in any tile.
template <class T>
void group_scores(const KvView& kv, const T* k_cache, const QueryTile& g, int32_t first, float scale, float* scores,
                  Scratch& scratch) {
  const int64_t hd = kv.layout.head_dim;
  const int32_t end = g.end_of(g.rows() - 1), n = end - first;
  kv.for_each_block(k_cache, first, end, [&](int32_t j0, int32_t rows, const T* base) {
    const FloatRows block = float_rows(base, rows, kv.stride(), hd, scratch);
    for (int32_t r0 = 0; r0 < rows; r0 += kRowsAtOnce) {
      const int count = std::min(kRowsAtOnce, rows - r0);
      const float* k[kRowsAtOnce];
      for (int j = 0; j < kRowsAtOnce; ++j) k[j] = block.p + (r0 + std::min(j, count - 1)) * block.stride;
      for (int32_t x = 0; x < g.rows(); ++x) {
        const int32_t seen = g.end_of(x) - first - (j0 + r0);  // of these rows, the ones x attends
        if (seen <= 0) continue;
        const float* q = g.q_row(x, hd);
        V acc[kRowsAtOnce];
        for (V& a : acc) a = zero();
        for (int64_t c = 0; c < hd; c += W) {
          const V qc = load_kv(q + c, hd - c);
          for (int j = 0; j < kRowsAtOnce; ++j) acc[j] = fma(qc, load_kv(k[j] + c, hd - c), acc[j]);
        }
        store_sums(acc, scale, scores + x * n + j0 + r0, std::min(count, seen));
      }
    }
  });
}

// out_x = sum_j p[x * n + j] * V_{first + j}, in ascending j. A block's V rows stay in L1 while
// every query row of the tile consumes them; each row's running sum waits in its output row between
// blocks (stored and reloaded exactly, so the order of operations per element is just ascending j).
template <class T>
void group_values(const KvView& kv, const T* v_cache, const QueryTile& g, int32_t first, const float* p,
                  Scratch& scratch) {
  const int64_t hd = kv.layout.head_dim;
  const int32_t end = g.end_of(g.rows() - 1), n = end - first;
  for (int32_t x = 0; x < g.rows(); ++x) std::fill(g.out_row(x, hd), g.out_row(x, hd) + hd, 0.0f);
  kv.for_each_block(v_cache, first, end, [&](int32_t j0, int32_t rows, const T* base) {
    const FloatRows block = float_rows(base, rows, kv.stride(), hd, scratch);
    for (int32_t x = 0; x < g.rows(); ++x) {
      const int32_t seen = std::min(rows, g.end_of(x) - first - j0);
      if (seen <= 0) continue;
      float* out = g.out_row(x, hd);
      const float* px = p + x * n + j0;
      for (int64_t c0 = 0; c0 < hd; c0 += kOutVecs * W) {
        V acc[kOutVecs];
        for (int i = 0; i < kOutVecs; ++i) acc[i] = load_partial(out + c0 + i * W, int(hd - c0 - i * W));
        for (int32_t r = 0; r < seen; ++r) {
          const V pj = set1(px[r]);
          const float* v = block.p + r * block.stride + c0;
          for (int i = 0; i < kOutVecs; ++i) acc[i] = fma(pj, load_kv(v + i * W, hd - c0 - i * W), acc[i]);
        }
        for (int i = 0; i < kOutVecs; ++i) store_partial(out + c0 + i * W, acc[i], int(hd - c0 - i * W));
      }
    }
  });
}

// Two-pass softmax attention of a query tile over positions first.. (each row to its own end);
// scratch.scores holds rows * (n + 1), n = the last token's end - first.
template <class T>
void attend_tile(const KvView& kv, const T* k_cache, const T* v_cache, const QueryTile& g, int32_t first, float scale,
                 Scratch& scratch) {
  const int32_t n = g.end_of(g.rows() - 1) - first;
  float* scores = scratch.scores.data();
  float* sums = scores + int64_t(g.rows()) * n;
  group_scores(kv, k_cache, g, first, scale, scores, scratch);
  for (int32_t x = 0; x < g.rows(); ++x) {
    float* row = scores + x * n;
    const int32_t seen = g.end_of(x) - first;
    sums[x] = exp_sub_sum(row, seen, max_of(row, seen));
  }
  group_values(kv, v_cache, g, first, scores, scratch);
  for (int32_t x = 0; x < g.rows(); ++x) scale_inplace(g.out_row(x, kv.layout.head_dim), kv.layout.head_dim, 1.0f / sums[x]);
}

// Consecutive query tokens of one sequence: the first attends positions 0 .. context - 1, each next
// one position more.
struct TileRef {
  int32_t seq;
  int32_t token;  // the first one's row in q
  int32_t tokens;
  int32_t context;
};

// Query tokens per tile: 16 tokens of a 4-head group are 64 query rows against each K and V row.
constexpr int32_t kQueryTile = 16;

void check_cache_type(DType kv_type, const KvLayout& layout, const char* op) {
  if (kv_type != DType::F32 && kv_type != DType::F16 && kv_type != DType::Q8_0 && kv_type != DType::F8_E4M3)
    throw_invalid_argument("%s: the CPU KV cache holds f32, f16, q8_0 or f8_e4m3, not %s", op, dtype_name(kv_type).data());
  if (kv_type == DType::Q8_0 && layout.head_dim % 32 != 0)
    throw_invalid_argument("%s: a q8_0 KV cache needs a head dim that is a multiple of 32, not %d", op, layout.head_dim);
}

// n values from value `dst` on; a q8_0 cache quantizes them 32 at a time (each head's row is whole
// blocks: dst and n are multiples of 32), as llama.cpp's q8_0 does.
template <class T>
void write_rows(void* cache, size_t dst, const float* src, size_t n) {
  T* out = static_cast<T*>(cache) + dst / kValuesPer<T>;
  if constexpr (std::is_same_v<T, float>) {
    std::memcpy(out, src, n * sizeof(float));
  } else if constexpr (std::is_same_v<T, BlockQ8_0>) {
    for (size_t b = 0; b < n / 32; ++b) codec::quantize_block(src + 32 * b, out[b]);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    for (size_t i = 0; i < n; ++i) out[i] = codec::float_to_e4m3(src[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = codec::float_to_half(src[i]);
  }
}

// Tiles of kQueryTile tokens, unless that leaves too few (tile, KV head) work items to keep every
// thread busy: a sequence verifying its drafts is one short tile, 3 items for SmolLM2's 3 KV heads
// on 2 threads. Halving the tile costs K and V rereads from cache, not bits (tiles never change a
// token's result).
int32_t tile_for(const AttentionBatch& batch, int32_t num_kv_heads) {
  if (batch.window > 0) return 1;  // a sliding window starts each token's positions elsewhere
  const int64_t enough = 4 * int64_t(num_threads());
  int32_t tile = kQueryTile;
  for (; tile > 1; tile = (tile + 1) / 2) {
    int64_t tiles = 0;
    for (int32_t s = 0; s < batch.num_seqs; ++s) {
      tiles += (batch.query_start[s + 1] - batch.query_start[s] + tile - 1) / tile;
    }
    if (tiles * num_kv_heads >= enough) break;
  }
  return tile;
}

template <class T>
void attend_all(const float* q, const T* kc, const T* vc, const KvLayout& layout, const AttentionBatch& batch,
                int32_t num_heads, float scale, float* out) {
  const int32_t tile = tile_for(batch, layout.num_kv_heads);
  std::vector<TileRef> tiles;
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    const int32_t begin = batch.query_start[s], n = batch.query_start[s + 1] - begin, context = batch.context_lens[s];
    for (int32_t i = 0; i < n; i += tile) {
      const int32_t c = context - n + i + 1;  // token i's
      // Padding rows (no context) are skipped; a tile starts at the first token that has one.
      const int32_t skip = std::min(std::max(0, 1 - c), n - i);
      if (skip >= std::min(tile, n - i)) continue;
      tiles.push_back({s, begin + i + skip, std::min(tile, n - i) - skip, c + skip});
    }
  }
  const int32_t group = num_heads / layout.num_kv_heads;
  const int64_t hd = layout.head_dim;
  const int64_t items = int64_t(tiles.size()) * layout.num_kv_heads;

  // Work items are (tile, KV head) pairs, each computed whole by one thread, so any schedule is
  // deterministic; one by one balances causal prefill, where late tokens see many more positions.
  parallel_for_each(items, [&](int64_t it) {
    thread_local Scratch scratch;
    const TileRef t = tiles[size_t(it / layout.num_kv_heads)];
    const int32_t kv_head = int32_t(it % layout.num_kv_heads);
    const int32_t first = batch.window > 0 ? std::max(0, t.context - batch.window) : 0;
    const QueryTile g{q + (int64_t(t.token) * num_heads + int64_t(kv_head) * group) * hd,
                      out + (int64_t(t.token) * num_heads + int64_t(kv_head) * group) * hd,
                      group, t.tokens, int64_t(num_heads) * hd, t.context};
    const size_t need = size_t(g.rows()) * size_t(t.context + t.tokens - first);
    scratch.scores.resize(std::max(scratch.scores.size(), need));
    const int32_t table_row = batch.table_rows ? batch.table_rows[t.seq] : t.seq;
    const int32_t* table = batch.block_tables + int64_t(table_row) * batch.max_blocks_per_seq;
    attend_tile(KvView{layout, table, kv_head}, kc, vc, g, first, scale, scratch);
  });
}

}  // namespace

void kv_write(const KvLayout& layout, DType kv_type, void* k_cache, void* v_cache, const float* k, const float* v,
              const int32_t* slot_mapping, int64_t num_tokens) {
  check_cache_type(kv_type, layout, "kv_write");
  const size_t row = size_t(layout.num_kv_heads) * size_t(layout.head_dim);
  const auto write = kv_type == DType::F16       ? write_rows<uint16_t>
                     : kv_type == DType::Q8_0    ? write_rows<BlockQ8_0>
                     : kv_type == DType::F8_E4M3 ? write_rows<uint8_t>
                                                 : write_rows<float>;
  for (int64_t t = 0; t < num_tokens; ++t) {
    if (slot_mapping[t] < 0) continue;  // padding token: nothing to store
    const size_t dst = size_t(slot_mapping[t]) * row;
    write(k_cache, dst, k + t * row, row);
    write(v_cache, dst, v + t * row, row);
  }
}

void paged_attention(const float* q, const void* k_cache, const void* v_cache, DType kv_type, const KvLayout& layout,
                     const AttentionBatch& batch, int32_t num_heads, float scale, float* out) {
  check_cache_type(kv_type, layout, "paged_attention");
  if (kv_type == DType::Q8_0) {
    attend_all(q, static_cast<const BlockQ8_0*>(k_cache), static_cast<const BlockQ8_0*>(v_cache), layout, batch,
               num_heads, scale, out);
  } else if (kv_type == DType::F16) {
    attend_all(q, static_cast<const uint16_t*>(k_cache), static_cast<const uint16_t*>(v_cache), layout, batch, num_heads,
               scale, out);
  } else if (kv_type == DType::F8_E4M3) {
    attend_all(q, static_cast<const uint8_t*>(k_cache), static_cast<const uint8_t*>(v_cache), layout, batch, num_heads,
               scale, out);
  } else {
    attend_all(q, static_cast<const float*>(k_cache), static_cast<const float*>(v_cache), layout, batch, num_heads,
               scale, out);
  }
}

}  // namespace flashserve::kernels::FLASHSERVE_ISA
