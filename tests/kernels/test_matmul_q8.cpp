// matmul_q8: 8-bit activations and integer dots. Checked bit for bit against a plain transcription of
// its contract (quantize each 32-block to nearest even, the exact integer dot of each chunk or half,
// one fma per chunk or half into the dot's sum, plus the offset terms' sum), for batch and thread
// invariance, and against the f64 product within the rounding 8-bit activations bring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/threads.h"
#include "tests/kernels/quant_inputs.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;

// Every quantized format; the float ones have no integer codes.
constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::IQ4_NL, DType::Q2_K,
                            DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_XS};

std::vector<float> run_q8(const std::vector<float>& x, int64_t nt, int64_t k, const std::vector<uint8_t>& w, DType t,
                          int64_t n_out) {
  std::vector<float> y(size_t(nt * n_out), NAN);
  matmul_q8(x.data(), nt, k, w.data(), t, n_out, y.data());
  return y;
}

float f16(const uint8_t* p) { return float(ref_half(read_u16(p))); }

// A 32-element chunk of weights as the contract sees it: value = code * scale + offset, the offset
// (if any) times the activations' d * sum q. Read from GGML's byte layouts, as ref_quants::elem reads
// the values. The super-scaled formats' chunks give only their codes (int_scales_of has the rest).
struct Chunk {
  int code[32];
  float scale = 0.0f;
  bool has_offset = false;
  float offset = 0.0f;
};

Chunk chunk_of(DType t, const uint8_t* row, int64_t chunk) {
  using ref_quants::kCodebook;
  using ref_quants::nibble;
  Chunk ch;
  const int c = int(chunk % 8);  // within a super-block
  switch (t) {
    case DType::Q8_0: {
      const uint8_t* b = row + 34 * chunk;
      for (int e = 0; e < 32; ++e) ch.code[e] = int8_t(b[2 + e]);
      ch.scale = f16(b);
      break;
    }
    case DType::Q4_0:
    case DType::Q4_1: {
      const uint8_t* b = row + (t == DType::Q4_0 ? 18 : 20) * chunk;
      for (int e = 0; e < 32; ++e) ch.code[e] = nibble(b + (t == DType::Q4_0 ? 2 : 4), e);
      ch.scale = f16(b);
      ch.has_offset = true;
      ch.offset = t == DType::Q4_0 ? -8.0f * f16(b) : f16(b + 2);
      break;
    }
    case DType::Q5_0:
    case DType::Q5_1: {
      const bool one = t == DType::Q5_1;
      const uint8_t* b = row + (one ? 24 : 22) * chunk;
      const uint32_t qh = ref_quants::u32(b + (one ? 4 : 2));
      for (int e = 0; e < 32; ++e) ch.code[e] = (nibble(b + (one ? 8 : 6), e) | int((qh >> e) & 1) << 4) - (one ? 0 : 16);
      ch.scale = f16(b);
      if (one) {
        ch.has_offset = true;
        ch.offset = f16(b + 2);
      }
      break;
    }
    case DType::IQ4_NL: {
      const uint8_t* b = row + 18 * chunk;
      for (int e = 0; e < 32; ++e) ch.code[e] = kCodebook[nibble(b + 2, e)];
      ch.scale = f16(b);
      break;
    }
    case DType::Q2_K: {  // scales[16] qs[64] d dmin
      const uint8_t* b = row + 84 * (chunk / 8);
      for (int e = 0; e < 32; ++e) ch.code[e] = (b[16 + 32 * (c / 4) + e] >> (2 * (c % 4))) & 3;
      break;
    }
    case DType::Q3_K: {  // hmask[32] qs[64] scales[12] d
      const uint8_t* b = row + 110 * (chunk / 8);
      for (int e = 0; e < 32; ++e) {
        ch.code[e] = ((b[32 + 32 * (c / 4) + e] >> (2 * (c % 4))) & 3) - ((b[e] >> c) & 1 ? 0 : 4);
      }
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {  // d dmin scales[12] (qh[32]) qs[128]
      const bool five = t == DType::Q5_K;
      const uint8_t* b = row + (five ? 176 : 144) * (chunk / 8);
      const uint8_t* qs = b + (five ? 48 : 16) + 32 * (c / 2);
      for (int e = 0; e < 32; ++e) {
        ch.code[e] = ((qs[e] >> (4 * (c % 2))) & 15) | (five ? ((b[16 + e] >> c) & 1) << 4 : 0);
      }
      break;
    }
    case DType::Q6_K: {  // ql[128] qh[64] scales[16] d
      const uint8_t* b = row + 210 * (chunk / 8);
      const int h = c / 4, g = c % 4;
      for (int e = 0; e < 32; ++e) {
        const int lo = (b[64 * h + 32 * (g % 2) + e] >> (4 * (g / 2))) & 15;
        ch.code[e] = (lo | ((b[128 + 32 * h + e] >> (2 * g)) & 3) << 4) - 32;
      }
      break;
    }
    case DType::Q8_K: {  // f32 d, qs[256], bsums
      const uint8_t* b = row + 292 * (chunk / 8);
      for (int e = 0; e < 32; ++e) ch.code[e] = int8_t(b[4 + 32 * c + e]);
      float d;
      std::memcpy(&d, b, 4);
      ch.scale = d;
      break;
    }
    case DType::IQ4_XS: {  // d scales_h scales_l[4] qs[128]
      const uint8_t* b = row + 136 * (chunk / 8);
      for (int e = 0; e < 32; ++e) ch.code[e] = kCodebook[nibble(b + 8 + 16 * c, e)];
      break;
    }
    default: ADD_FAILURE() << "no chunk reader for " << dtype_name(t);
  }
  return ch;
}

// The formats whose chunk scales are integers times one f16 per super-block: their activations
// take one d per 256 elements and their dots one fma per super-block.
bool super_scaled(DType t) {
  return t == DType::Q2_K || t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K ||
         t == DType::IQ4_XS;
}

// A super-scaled chunk's integer scales and minimums (of elements 0..15 and 16..31), and its
// super-block's d and dmin.
struct IntScales {
  int scale[2], min[2] = {0, 0};
  float d, dmin = 0.0f;
};

IntScales int_scales_of(DType t, const uint8_t* row, int64_t chunk) {
  const int c = int(chunk % 8);
  IntScales s;
  switch (t) {
    case DType::Q2_K: {  // scales[16] qs[64] d dmin
      const uint8_t* b = row + 84 * (chunk / 8);
      for (int h = 0; h < 2; ++h) s.scale[h] = b[2 * c + h] & 15, s.min[h] = b[2 * c + h] >> 4;
      s.d = f16(b + 80);
      s.dmin = f16(b + 82);
      break;
    }
    case DType::Q3_K: {  // hmask[32] qs[64] scales[12] d
      const uint8_t* b = row + 110 * (chunk / 8);
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * c + h;
        s.scale[h] = (((b[96 + i % 8] >> (4 * (i / 8))) & 15) | ((b[96 + 8 + i % 4] >> (2 * (i / 4))) & 3) << 4) - 32;
      }
      s.d = f16(b + 108);
      break;
    }
    case DType::Q4_K:
    case DType::Q5_K: {
      const uint8_t* b = row + (t == DType::Q5_K ? 176 : 144) * (chunk / 8);
      s.scale[0] = s.scale[1] = ref_quants::k_code(b + 4, c, 0);
      s.min[0] = s.min[1] = ref_quants::k_code(b + 4, c, 1);
      s.d = f16(b);
      s.dmin = f16(b + 2);
      break;
    }
    case DType::Q6_K: {
      const uint8_t* b = row + 210 * (chunk / 8);
      for (int h = 0; h < 2; ++h) s.scale[h] = int8_t(b[192 + 2 * c + h]);
      s.d = f16(b + 208);
      break;
    }
    case DType::IQ4_XS: {
      const uint8_t* b = row + 136 * (chunk / 8);
      s.scale[0] = s.scale[1] = (((b[4 + c / 2] >> (4 * (c % 2))) & 15) | ((read_u16(b + 2) >> (2 * c)) & 3) << 4) - 32;
      s.d = f16(b);
      break;
    }
    default: ADD_FAILURE() << dtype_name(t) << " is not super-scaled";
  }
  return s;
}

// x's 8-bit codes, with one d for each `group` elements (that of their largest magnitude, NaN
// ignored): NaN codes 0, the rest round to nearest even within [-127, 127].
std::vector<int> plain_codes(const float* x, int64_t k, int64_t group, std::vector<float>& d) {
  std::vector<int> q(static_cast<size_t>(k));
  d.assign(size_t(k / group), 0.0f);
  for (int64_t g = 0; g < k / group; ++g) {
    float amax = 0.0f;
    for (int64_t i = g * group; i < (g + 1) * group; ++i) amax = std::max(amax, std::fabs(x[i]));
    d[size_t(g)] = amax / 127.0f;
    const float id = d[size_t(g)] != 0.0f ? 1.0f / d[size_t(g)] : 0.0f;
    for (int64_t i = g * group; i < (g + 1) * group; ++i) {
      const float v = x[i] * id;
      q[size_t(i)] = std::isnan(v) ? 0 : int(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
    }
  }
  return q;
}

// The super-scaled formats' contract: per super-block, the exact int32 sum of each chunk's (or
// half's) integer dot times its integer scale, added by one fma with the super-block's d times
// the activations' d; Q2_K's, Q4_K's and Q5_K's minimums times the halves' sums of q likewise, by
// one fma with -dmin times d into the offsets.
float plain_super_dot(const float* x, const uint8_t* row, int64_t k, DType t) {
  std::vector<float> d;
  const std::vector<int> q = plain_codes(x, k, 256, d);
  float acc = 0.0f, off = 0.0f;
  for (int64_t sb = 0; sb < k / 256; ++sb) {
    int32_t sums = 0, mins = 0;
    float wd = 0.0f, wdmin = 0.0f;
    for (int64_t b = 8 * sb; b < 8 * sb + 8; ++b) {
      const Chunk ch = chunk_of(t, row, b);
      const IntScales s = int_scales_of(t, row, b);
      int dot[2] = {0, 0}, qsum[2] = {0, 0};
      for (int e = 0; e < 32; ++e) {
        dot[e / 16] += ch.code[e] * q[size_t(32 * b + e)];
        qsum[e / 16] += q[size_t(32 * b + e)];
      }
      sums += dot[0] * s.scale[0] + dot[1] * s.scale[1];
      mins += s.min[0] * qsum[0] + s.min[1] * qsum[1];
      wd = s.d, wdmin = s.dmin;
    }
    acc = std::fma(float(sums), wd * d[size_t(sb)], acc);
    if (t == DType::Q2_K || t == DType::Q4_K || t == DType::Q5_K) off = std::fma(float(mins), -wdmin * d[size_t(sb)], off);
  }
  return acc + off;
}

// The contract, written out with no vectors: per chunk, the exact integer dot (or each half's)
// added into the dot's one float sum by an fma with the scale times d, in chunk order; the offset
// terms (multiples of d * sum q) into their own sum, added at the end. The super-scaled formats:
// plain_super_dot.
float plain_dot(const float* x, const uint8_t* row, int64_t k, DType t) {
  if (super_scaled(t)) return plain_super_dot(x, row, k, t);
  float acc = 0.0f, off = 0.0f;
  for (int64_t b = 0; b < k / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32], sum[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const float v = xb[i] * id;
      q[i] = std::isnan(v) ? 0 : int(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
      sum[i / 16] += q[i];
    }
    const Chunk ch = chunk_of(t, row, b);
    int dot[2] = {0, 0};
    for (int e = 0; e < 32; ++e) dot[e / 16] += ch.code[e] * q[e];
    acc = std::fma(float(dot[0] + dot[1]), ch.scale * d, acc);
    if (ch.has_offset) off = std::fma(ch.offset, d * float(sum[0] + sum[1]), off);
  }
  return acc + off;
}

struct Case {
  int64_t nt, k, n_out;
};

TEST(MatmulQ8, EqualsThePlainContractBitForBit) {
  std::mt19937 rng(71);
  for (DType t : kTypes) {
    const bool super = block_elems(t) == 256;
    const std::vector<Case> cases = super ? std::vector<Case>{{1, 256, 9}, {5, 512, 13}, {3, 768, 7}, {8, 1536, 6}}
                                          : std::vector<Case>{{1, 64, 9}, {1, 96, 5}, {5, 576, 13}, {3, 160, 7}, {8, 1536, 6}};
    for (const Case c : cases) {
      // Raw blocks reach every code and scale; activations span magnitudes, with zero blocks.
      const auto w = random_blocks(rng, t, c.n_out * c.k / block_elems(t));
      auto x = random_floats(rng, size_t(c.nt * c.k), -3.0f, 3.0f);
      for (int64_t i = 0; i < 32; ++i) x[size_t(i)] = 0.0f;
      for (size_t i = 64; i < x.size(); i += 97) x[i] *= 1000.0f;
      const auto y = run_q8(x, c.nt, c.k, w, t, c.n_out);
      const size_t rb = row_bytes(t, c.k);
      for (int64_t tok = 0; tok < c.nt; ++tok) {
        for (int64_t o = 0; o < c.n_out; ++o) {
          const float want = plain_dot(x.data() + tok * c.k, w.data() + size_t(o) * rb, c.k, t);
          const float got = y[size_t(tok * c.n_out + o)];
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0)
              << dtype_name(t) << " k=" << c.k << " token " << tok << " row " << o << ": " << got << " vs " << want;
        }
      }
    }
  }
}

// Any token of a batch equals itself alone, at every thread count.
TEST(MatmulQ8, BatchAndThreadInvariant) {
  std::mt19937 rng(72);
  const int64_t n_out = 37, nt = 11;
  for (DType t : kTypes) {
    const int64_t k = block_elems(t) == 256 ? 768 : 576;
    const auto w = quantized_rows(rng, t, n_out, k);
    const auto x = random_floats(rng, size_t(nt * k));
    const auto batch = run_q8(x, nt, k, w, t, n_out);
    for (int threads : {1, 2}) {
      set_num_threads(threads);
      for (int64_t tok = 0; tok < nt; ++tok) {
        const std::vector<float> one(x.begin() + tok * k, x.begin() + (tok + 1) * k);
        const auto alone = run_q8(one, 1, k, w, t, n_out);
        ASSERT_EQ(std::memcmp(alone.data(), batch.data() + tok * n_out, size_t(n_out) * 4), 0)
            << dtype_name(t) << " token " << tok << " threads " << threads;
      }
    }
    set_num_threads(0);
  }
}

// Against the f64 product of the same weights: each activation moves by at most half its block's
// step (amax / 254, amax over the 32 elements, or the 256 of the super-scaled formats), so a dot
// moves by at most the sum over blocks of amax / 254 * sum |w|, plus float rounding.
TEST(MatmulQ8, WithinTheActivationRoundingOfTheExactProduct) {
  std::mt19937 rng(73);
  const int64_t k = 1536, n_out = 64, nt = 3;
  for (DType t : kTypes) {
    const auto w = quantized_rows(rng, t, n_out, k);
    const auto x = random_floats(rng, size_t(nt * k));
    const auto y = run_q8(x, nt, k, w, t, n_out);
    const RefMatmul ref = ref_matmul(x.data(), nt, k, w.data(), t, n_out);
    double worst = 0.0;
    for (int64_t tok = 0; tok < nt; ++tok) {
      for (int64_t o = 0; o < n_out; ++o) {
        const auto wd = ref_dequant(t, w.data() + size_t(o) * row_bytes(t, k), k);
        double bound = 0.0;
        const int64_t group = super_scaled(t) ? 256 : 32;
        for (int64_t b = 0; b < k / group; ++b) {
          double amax = 0.0, wsum = 0.0;
          for (int64_t e = b * group; e < b * group + group; ++e) {
            amax = std::max(amax, double(std::fabs(x[size_t(tok * k + e)])));
            wsum += std::fabs(wd[size_t(e)]);
          }
          bound += amax / 254.0 * wsum;
        }
        const size_t i = size_t(tok * n_out + o);
        const double err = std::fabs(y[i] - ref.y[i]);
        EXPECT_LE(err, bound + 1e-5 * ref.abs_sum[i]) << dtype_name(t) << " token " << tok << " row " << o;
        worst = std::max(worst, err / bound);
      }
    }
    EXPECT_GT(worst, 0.0) << dtype_name(t) << ": 8-bit activations should not be exact";
    std::printf("%s: largest error %.3f of its bound\n", std::string(dtype_name(t)).c_str(), worst);
  }
}

// Activations with NaN and infinities quantize as the contract says (NaN codes 0; an infinite block
// scale makes the block's dot NaN): equal to the plain transcription, NaN where it is NaN.
TEST(MatmulQ8, NonFiniteActivationsFollowThePlainContract) {
  std::mt19937 rng(74);
  const int64_t k = 256, n_out = 11;
  for (DType t : {DType::Q8_0, DType::Q4_1, DType::Q6_K}) {
    const auto w = random_blocks(rng, t, n_out * k / block_elems(t));
    auto x = random_floats(rng, size_t(2 * k), -3.0f, 3.0f);
    x[5] = NAN;                             // one NaN in an otherwise finite block
    x[40] = INFINITY;                       // an infinite block of token 0
    x[size_t(k) + 100] = -INFINITY;         // and of token 1
    for (int64_t i = 160; i < 192; ++i) x[size_t(i)] = NAN;  // a block of NaN only
    const auto y = run_q8(x, 2, k, w, t, n_out);
    const size_t rb = row_bytes(t, k);
    for (int64_t tok = 0; tok < 2; ++tok) {
      for (int64_t o = 0; o < n_out; ++o) {
        const float want = plain_dot(x.data() + tok * k, w.data() + size_t(o) * rb, k, t);
        const float got = y[size_t(tok * n_out + o)];
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << dtype_name(t) << " token " << tok << " row " << o << ": " << got;
        } else {
          EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << dtype_name(t) << " token " << tok << " row " << o;
        }
      }
    }
  }
}

// Packed rows (pack_rows_for_q8) give matmul_q8's bits: every token count a tile shape handles (tiles
// of 8, 4, 3, 2 and 1 tokens, and past a block of 64 tokens; with AMX, tiles of sixteen from 12 tokens
// on (28 for the formats scaled per 32 weights), the last padded with zeros, and past a block of 128;
// with AVX-512 VNNI, activations in runs of eight tokens, the last shorter), row counts around the
// groups of sixteen and their halves, odd and even block counts.
TEST(MatmulQ8, PackedRowsGiveTheSameBits) {
  std::mt19937 rng(75);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    ASSERT_TRUE(q8_packs(t));
    for (int64_t n_out : {1, 7, 8, 9, 16, 24, 37}) {
      for (int64_t blocks : {1, 2, 3, 18}) {
        const int64_t k = blocks * block_elems(t);
        const auto w = random_blocks(rng, t, n_out * blocks);
        std::vector<uint8_t> packed(q8_packed_bytes(t, n_out, k));
        // Rows go sixteen at a time; unpacked chunk scales take 4 (Q3_K, Q4_K, Q5_K) or 2 (IQ4_XS)
        // bytes more per row and super-block.
        const size_t per_row = t == DType::Q3_K || t == DType::Q4_K || t == DType::Q5_K ? 4 : t == DType::IQ4_XS ? 2 : 0;
        const int64_t rows = (n_out + 15) / 16 * 16;
        ASSERT_EQ(packed.size(), size_t(rows) * (row_bytes(t, k) + size_t(blocks) * per_row));
        pack_rows_for_q8(w.data(), t, n_out, k, packed.data());
        for (int64_t nt : {1, 2, 3, 5, 8, 11, 12, 15, 16, 27, 28, 35, 70, 130}) {
          auto x = random_floats(rng, size_t(nt * k), -3.0f, 3.0f);
          for (size_t i = 7; i < x.size(); i += 61) x[i] *= 1000.0f;
          const auto want = run_q8(x, nt, k, w, t, n_out);
          std::vector<float> got(want.size(), NAN);
          matmul_q8_packed(x.data(), nt, k, packed.data(), t, n_out, got.data());
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
              << dtype_name(t) << " n_out=" << n_out << " k=" << k << " tokens=" << nt;
        }
      }
    }
  }
  for (DType t : {DType::Q8_K, DType::F32}) EXPECT_FALSE(q8_packs(t)) << dtype_name(t);
  std::vector<float> x(256), y(1);
  std::vector<uint8_t> w(4096);
  EXPECT_THROW(matmul_q8_packed(x.data(), 1, 256, w.data(), DType::Q8_K, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(matmul_q8_packed(x.data(), 1, 64, w.data(), DType::Q4_K, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(matmul_q8_packed(x.data(), 1, 48, w.data(), DType::Q4_1, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(pack_rows_for_q8(w.data(), DType::Q8_K, 1, 256, y.data()), std::invalid_argument);
}

// The packed tiles add maddubs results in int16 as far as the largest codes times the largest
// activations allow (kRun, kQuadsInInt16 and kPairSums in matmul_q8_packed.cpp): blocks of one byte
// repeated put every code, scale and minimum at an extreme, against activations all +127 or all
// -127, which any longer run would overflow. 70 tokens: a block of 64 (codes unpacked once for all
// of them), then tiles of 4 and 2.
TEST(MatmulQ8, PackedRowsAtTheExtremesOfCodesAndActivations) {
  constexpr int64_t n_out = 16, nt = 70;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::IQ4_NL, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS}) {
    const int64_t blocks = 3, k = blocks * block_elems(t);
    const size_t bb = size_t(block_bytes(t));
    for (uint8_t fill : {0x00, 0x7f, 0x80, 0x81, 0xff}) {
      std::vector<uint8_t> w(bb * size_t(n_out * blocks), fill);
      const uint16_t one = 0x3c00;  // f16 1.0 in every scale field
      for (int64_t b = 0; b < n_out * blocks; ++b) {
        for (size_t off : scale_offsets(t)) std::memcpy(w.data() + size_t(b) * bb + off, &one, 2);
      }
      std::vector<uint8_t> packed(q8_packed_bytes(t, n_out, k));
      pack_rows_for_q8(w.data(), t, n_out, k, packed.data());
      for (float sign : {1.0f, -1.0f}) {
        const std::vector<float> x(size_t(nt * k), 3.0f * sign);
        const auto want = run_q8(x, nt, k, w, t, n_out);
        std::vector<float> got(want.size(), NAN);
        matmul_q8_packed(x.data(), nt, k, packed.data(), t, n_out, got.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
            << dtype_name(t) << " bytes 0x" << std::hex << int(fill) << std::dec << " activations " << sign * 127;
      }
    }
  }
}

TEST(MatmulQ8, RefusesFloatFormatsAndPartialBlocks) {
  std::vector<float> x(512), y(1);
  std::vector<uint8_t> w(4096);
  for (DType t : {DType::F32, DType::F16, DType::BF16}) {
    EXPECT_FALSE(matmul_q8_supports(t));
    EXPECT_THROW(matmul_q8(x.data(), 1, 64, w.data(), t, 1, y.data()), std::invalid_argument);
  }
  for (DType t : kTypes) EXPECT_TRUE(matmul_q8_supports(t)) << dtype_name(t);
  EXPECT_THROW(matmul_q8(x.data(), 1, 48, w.data(), DType::Q8_0, 1, y.data()), std::invalid_argument);
  EXPECT_THROW(matmul_q8(x.data(), 1, 288, w.data(), DType::Q4_K, 1, y.data()), std::invalid_argument);
}

}  // namespace
}  // namespace flashserve::test
