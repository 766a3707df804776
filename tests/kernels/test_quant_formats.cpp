// The K-quant, Q5_x and IQ4 formats: metadata, decoding against the gguf Python package and an f64
// reference, the reference quantizers, and partial blocks refused.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/matmul.h"
#include "tests/kernels/quant_inputs.h"
#include "tests/kernels/reference.h"

namespace flashserve::test {
namespace {

using namespace kernels;
namespace fs = std::filesystem;

TEST(QuantFormats, GgmlIdsNamesAndSizes) {
  struct Want { uint32_t id; DType t; const char* name; int64_t elems, bytes; };
  // Block sizes as GGML's type traits list them.
  const Want want[] = {{6, DType::Q5_0, "Q5_0", 32, 22},     {7, DType::Q5_1, "Q5_1", 32, 24},
                       {10, DType::Q2_K, "Q2_K", 256, 84},   {11, DType::Q3_K, "Q3_K", 256, 110},
                       {12, DType::Q4_K, "Q4_K", 256, 144},  {13, DType::Q5_K, "Q5_K", 256, 176},
                       {14, DType::Q6_K, "Q6_K", 256, 210},  {15, DType::Q8_K, "Q8_K", 256, 292},
                       {20, DType::IQ4_NL, "IQ4_NL", 32, 18}, {23, DType::IQ4_XS, "IQ4_XS", 256, 136}};
  for (const Want& w : want) {
    EXPECT_EQ(dtype_from_ggml(w.id), w.t) << w.name;
    EXPECT_EQ(dtype_name(w.t), w.name);
    EXPECT_EQ(block_elems(w.t), w.elems) << w.name;
    EXPECT_EQ(block_bytes(w.t), w.bytes) << w.name;
    EXPECT_EQ(row_bytes(w.t, 3 * w.elems), size_t(3 * w.bytes)) << w.name;
  }
  for (uint32_t id : {9u, 16u, 21u, 22u, 24u, 29u}) EXPECT_FALSE(dtype_from_ggml(id).has_value()) << id;
}

// A row per type for decoding checks: quantized floats followed by raw random blocks.
std::vector<uint8_t> decode_input(std::mt19937& rng, DType t, int64_t& n) {
  const int64_t be = block_elems(t);
  auto bytes = quantized_rows(rng, t, 4, 2 * kSuperBlock);
  const int64_t raw_blocks = 64 * kSuperBlock / be;
  const auto raw = random_blocks(rng, t, raw_blocks);
  bytes.insert(bytes.end(), raw.begin(), raw.end());
  n = 8 * kSuperBlock + raw_blocks * be;
  return bytes;
}

std::vector<float> ours(DType t, const std::vector<uint8_t>& bytes, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(t, bytes.data(), out.data(), n);
  return out;
}

uint32_t bits_of(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }

// Every value is one rounding of an exact expression (kernels/cpu/kquant_codec.h), so it must be the
// f64 reference correctly rounded: within half an f32 ulp.
TEST(QuantFormats, DequantizeIsCorrectlyRoundedF64Reference) {
  std::mt19937 rng(31);
  for (DType t : kNewQuantTypes) {
    int64_t n = 0;
    const auto bytes = decode_input(rng, t, n);
    const auto got = ours(t, bytes, n);
    const auto want = ref_dequant(t, bytes.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(got[i] - want[i]), std::ldexp(std::fabs(want[i]), -24))
          << dtype_name(t) << " element " << i << ": got " << got[i] << " want " << want[i];
  }
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// Why the gguf reference cannot run here, or "" when it can.
std::string gguf_unavailable() {
  if (!fs::exists(FLASHSERVE_VENV_PYTHON))
    return "no venv python at " FLASHSERVE_VENV_PYTHON " (scripts/setup.sh creates it)";
  const std::string probe = quoted(FLASHSERVE_VENV_PYTHON) + " -c 'import gguf, numpy' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) return "the venv lacks gguf/numpy (pip install -r tests/requirements.txt)";
  return "";
}

// A fresh directory under /tmp, removed however the test ends.
struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/flashserve-quant-XXXXXX";
    if (mkdtemp(name) == nullptr) throw std::runtime_error("mkdtemp failed");
    path = name;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<char> read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The gguf package's numpy decoders are an implementation independent of ours. They compute each
// value as numpy does (unfused float32 products and differences); ours are bit-identical because
// every product before the last rounding is exact (kernels/cpu/kquant_codec.h). Q8_K is left out:
// gguf 0.19 has no Q8_K decoder (Q8_K is llama.cpp's activation format, not a weight format).
TEST(QuantFormats, DequantizeMatchesGgufPackageBitForBit) {
  if (const std::string why = gguf_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const TempDir tmp;
  const fs::path& dir = tmp.path;

  const DType types[] = {DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q5_0, DType::Q5_1, DType::IQ4_NL,
                         DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::IQ4_XS};
  std::mt19937 rng(32);
  std::vector<std::vector<float>> expected;
  std::string cmd = quoted(FLASHSERVE_VENV_PYTHON) + " " + quoted(FLASHSERVE_KERNEL_TESTS_DIR "/gguf_dequantize.py");
  for (DType t : types) {
    int64_t n = 0;
    const auto bytes = decode_input(rng, t, n);
    expected.push_back(ours(t, bytes, n));
    const std::string name(dtype_name(t));
    std::ofstream(dir / (name + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    cmd += " " + name + " " + quoted(dir / (name + ".bin")) + " " + quoted(dir / (name + ".f32"));
  }
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (size_t k = 0; k < std::size(types); ++k) {
    const std::string name(dtype_name(types[k]));
    const auto theirs = read_file(dir / (name + ".f32"));
    const auto& mine = expected[k];
    ASSERT_EQ(theirs.size(), mine.size() * 4) << name;
    for (size_t i = 0; i < mine.size(); ++i) {
      float v;
      std::memcpy(&v, theirs.data() + 4 * i, 4);
      ASSERT_EQ(bits_of(mine[i]), bits_of(v)) << name << " element " << i << " (block "
                                              << i / size_t(block_elems(types[k])) << "): ours " << mine[i]
                                              << ", gguf " << v;
    }
  }
}

// Quantizing and decoding back stays close: the normalised squared error of random floats (uniform,
// with outliers that widen some sub-blocks) within 1.5x of what this seed measured, so a broken
// quantizer shows but a different rounding choice would not; all-zero input stays exactly zero.
TEST(QuantFormats, QuantizeRoundTripIsClose) {
  struct Bound { DType t; double nmse; };
  const Bound bounds[] = {{DType::Q5_0, 4e-3}, {DType::Q5_1, 2.5e-3}, {DType::IQ4_NL, 1.2e-2}, {DType::Q2_K, 0.15},
                          {DType::Q3_K, 4.5e-2}, {DType::Q4_K, 1e-2}, {DType::Q5_K, 2.5e-3}, {DType::Q6_K, 6e-4},
                          {DType::Q8_K, 3e-4}, {DType::IQ4_XS, 1.2e-2}};
  std::mt19937 rng(33);
  for (const Bound& b : bounds) {
    const int64_t n = 16 * kSuperBlock;
    auto x = random_floats(rng, size_t(n), -1.0f, 1.0f);
    for (int64_t i = 0; i < n; i += 97) x[size_t(i)] *= 5.0f;
    std::vector<uint8_t> q(row_bytes(b.t, n));
    quantize_row(b.t, x.data(), q.data(), n);
    const auto back = ours(b.t, q, n);
    double err = 0, norm = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - double(x[i])) * (back[i] - double(x[i]));
      norm += double(x[i]) * x[i];
    }
    EXPECT_LE(err / norm, b.nmse) << dtype_name(b.t);

    std::vector<float> zeros(size_t(kSuperBlock), 0.0f);
    quantize_row(b.t, zeros.data(), q.data(), kSuperBlock);
    for (float v : ours(b.t, q, kSuperBlock)) ASSERT_EQ(v, 0.0f) << dtype_name(b.t);
  }
}

TEST(QuantFormats, Q8KBlockSumsMatchItsQuants) {
  std::mt19937 rng(34);
  const auto x = random_floats(rng, 2 * size_t(kSuperBlock), -3.0f, 3.0f);
  BlockQ8_K q[2];
  quantize_row(DType::Q8_K, x.data(), q, 2 * kSuperBlock);
  for (const BlockQ8_K& b : q) {
    for (int i = 0; i < 16; ++i) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += b.qs[16 * i + j];
      EXPECT_EQ(b.bsums[i], sum);
    }
  }
}

// Partial blocks are refused by every entry point, naming the type.
TEST(QuantFormats, PartialBlocksThrowNamingTheType) {
  for (DType t : kNewQuantTypes) {
    const int64_t be = block_elems(t);
    const std::string name(dtype_name(t));
    std::vector<uint8_t> w(size_t(block_bytes(t)) * 4);
    std::vector<float> f(size_t(be) * 4);
    const int32_t id = 0;
    for (int64_t k : {be / 2, be + 16}) {
      auto expect_throw = [&](auto&& call, const char* what) {
        try {
          call();
          ADD_FAILURE() << name << " k=" << k << ": " << what << " did not throw";
        } catch (const std::invalid_argument& e) {
          EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
        }
      };
      expect_throw([&] { dequantize_row(t, w.data(), f.data(), k); }, "dequantize_row");
      expect_throw([&] { quantize_row(t, f.data(), w.data(), k); }, "quantize_row");
      expect_throw([&] { matmul(f.data(), 1, k, w.data(), t, 1, f.data()); }, "matmul");
      expect_throw([&] { get_row(w.data(), t, k, 0, f.data()); }, "get_row");
      expect_throw([&] { get_rows(w.data(), t, k, &id, 1, f.data()); }, "get_rows");
    }
  }
}

}  // namespace
}  // namespace flashserve::test
