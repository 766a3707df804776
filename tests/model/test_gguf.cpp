// GGUF reader and writer: round trips through real files, hand-crafted bytes for what the writer
// never produces, and corrupt inputs, which must all end in a GgufError and never in a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "model/gguf.h"
#include "tests/util/gguf_bytes.h"
#include "tests/util/heap_counter.h"
#include "tests/util/test_paths.h"

namespace flashserve {
namespace {

namespace fs = std::filesystem;
using kernels::DType;

using Bytes = test::GgufBytes;

Bytes header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
  return test::gguf_header(n_tensors, n_kv, version);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(rng());
  return v;
}

class GgufTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("flashserve_gguf_" + std::to_string(::getpid()) + "_" + info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name = "t.gguf") const { return (dir_ / name).string(); }

  std::string write(const std::vector<uint8_t>& bytes, const std::string& name = "t.gguf") const {
    std::ofstream(path(name), std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path(name);
  }
  std::unique_ptr<GgufFile> open(const std::vector<uint8_t>& bytes) const { return GgufFile::open(write(bytes)); }

  // Opening must throw a GgufError whose message names the file and contains every fragment.
  void expect_error(const std::vector<uint8_t>& bytes, const std::vector<std::string>& fragments) const {
    try {
      open(bytes);
      ADD_FAILURE() << "expected a GgufError";
    } catch (const GgufError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(path()), std::string::npos) << msg;
      for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "'" << f << "' not in: " << msg;
    }
  }

  fs::path dir_;
};

template <class Fn>
std::string error_of(Fn fn) {
  try {
    fn();
  } catch (const GgufError& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- Metadata ----

TEST_F(GgufTest, WriterMetadataRoundTrip) {
  GgufWriter w;
  w.add_uint32("a.u32", 4000000000u);
  w.add_int32("a.i32", -7);
  w.add_float32("a.f32", 0.25f);
  w.add_bool("a.bool", true);
  w.add_string("a.str", std::string("caf\xc3\xa9\0x", 7));
  w.add_string_array("a.strs", {"x", "", "yz"});
  w.add_float32_array("a.f32s", {1.5f, -2.0f});
  w.add_int32_array("a.i32s", {3, -4, 5});
  w.write(path());
  auto f = GgufFile::open(path());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->metadata().size(), 8u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->find("a.u32")->type, GgufType::U32);
  EXPECT_EQ(f->get_uint("a.u32"), 4000000000u);
  EXPECT_EQ(f->get_int("a.i32"), -7);
  EXPECT_EQ(f->get_float("a.f32"), 0.25);
  EXPECT_TRUE(f->get_bool("a.bool", false));
  EXPECT_EQ(f->get_string("a.str"), std::string("caf\xc3\xa9\0x", 7));
  EXPECT_EQ(f->get_string_array("a.strs"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(f->get_float_array("a.f32s"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f->get_int_array("a.i32s"), (std::vector<int64_t>{3, -4, 5}));
  EXPECT_EQ(f->get_float_array("a.i32s"), (std::vector<float>{3, -4, 5}));
}

// Every value type, including an array of arrays, which only hand-crafted bytes can hold.
std::vector<uint8_t> all_types_file(uint32_t version) {
  Bytes b = header(0, 16, version);
  b.key("u8", GgufType::U8).put<uint8_t>(200);
  b.key("i8", GgufType::I8).put<int8_t>(-100);
  b.key("u16", GgufType::U16).put<uint16_t>(60000);
  b.key("i16", GgufType::I16).put<int16_t>(-30000);
  b.key("u32", GgufType::U32).put<uint32_t>(4000000000u);
  b.key("i32", GgufType::I32).put<int32_t>(-2000000000);
  b.key("f32", GgufType::F32).put<float>(1.5f);
  b.key("bool", GgufType::BOOL).put<uint8_t>(0);
  b.key("str", GgufType::STRING).str("hello");
  b.key("u64", GgufType::U64).put<uint64_t>((1ull << 63) + 5);
  b.key("i64", GgufType::I64).put<int64_t>(-(1ll << 40));
  b.key("f64", GgufType::F64).put<double>(0.1);
  b.key("nested", GgufType::ARRAY).array(GgufType::ARRAY, 2);
  b.array(GgufType::I16, 2).put<int16_t>(1).put<int16_t>(2);
  b.array(GgufType::I16, 1).put<int16_t>(-3);
  b.key("empty", GgufType::ARRAY).array(GgufType::U8, 0);
  b.key("strs", GgufType::ARRAY).array(GgufType::STRING, 2).str("a").str("bc");
  b.key("u64s", GgufType::ARRAY).array(GgufType::U64, 2).put<uint64_t>(7).put<uint64_t>(~0ull);
  return b.b;
}

TEST_F(GgufTest, EveryValueTypeAndNestedArrays) {
  for (uint32_t version : {2u, 3u}) {
    auto f = open(all_types_file(version));
    EXPECT_EQ(f->version(), version);
    const auto& m = f->metadata();
    ASSERT_EQ(m.size(), 16u);
    EXPECT_EQ(f->get_uint("u8"), 200u);
    EXPECT_EQ(f->get_int("i8"), -100);
    EXPECT_EQ(f->get_uint("u16"), 60000u);
    EXPECT_EQ(f->get_int("i16"), -30000);
    EXPECT_EQ(f->get_int("u32"), 4000000000);
    EXPECT_EQ(f->get_int("i32"), -2000000000);
    EXPECT_EQ(f->get_float("f32"), 1.5);
    EXPECT_FALSE(f->get_bool("bool", true));
    EXPECT_EQ(f->get_string("str"), "hello");
    EXPECT_EQ(f->get_uint("u64"), (1ull << 63) + 5);
    EXPECT_EQ(f->get_int("i64"), -(1ll << 40));
    EXPECT_EQ(f->get_float("f64"), 0.1);
    EXPECT_EQ(f->find("i8")->type, GgufType::I8);
    EXPECT_EQ(f->find("f64")->type, GgufType::F64);
    EXPECT_TRUE(std::is_sorted(m.begin(), m.end(), [](const auto& a, const auto& b) { return a.key < b.key; }));
    ASSERT_NE(f->find("nested"), nullptr);
    const auto& nested = std::get<GgufArray>(f->find("nested")->v);
    ASSERT_EQ(nested.elem_type(), GgufType::ARRAY);
    ASSERT_EQ(nested.size(), 2u);
    std::vector<std::vector<int64_t>> items;
    for (GgufValue inner : nested) {
      const auto& array = std::get<GgufArray>(inner.v);
      EXPECT_EQ(array.elem_type(), GgufType::I16);
      items.emplace_back();
      for (GgufValue x : array) items.back().push_back(std::get<int64_t>(x.v));
    }
    EXPECT_EQ(items, (std::vector<std::vector<int64_t>>{{1, 2}, {-3}}));
    EXPECT_TRUE(f->get_int_array("empty").empty());
    EXPECT_EQ(f->get_string_array("strs"), (std::vector<std::string>{"a", "bc"}));
    EXPECT_EQ(f->get_float_array("u64s").at(0), 7.0f);
  }
}

TEST_F(GgufTest, GetterConversionsAndErrors) {
  auto f = open(all_types_file(3));
  EXPECT_EQ(f->get_float("u16"), 60000.0);
  EXPECT_EQ(f->get_float("i8"), -100.0);
  EXPECT_EQ(f->get_uint("missing", 9), 9u);
  EXPECT_EQ(f->get_float("missing", 2.5), 2.5);
  EXPECT_EQ(f->get_string("missing", "dflt"), "dflt");
  EXPECT_TRUE(f->get_bool("missing", true));
  EXPECT_EQ(f->find_tensor("missing"), nullptr);
  auto has = [](const std::string& msg, std::vector<std::string> parts) {
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  };
  has(error_of([&] { f->get_uint("nope"); }), {path(), "missing metadata key 'nope'"});
  has(error_of([&] { f->get_string("u32"); }), {"'u32'", "STRING", "U32"});
  has(error_of([&] { f->get_float("str"); }), {"'str'", "number", "STRING"});
  has(error_of([&] { f->get_int("f32"); }), {"'f32'", "integer", "F32"});
  has(error_of([&] { f->get_bool("u8", false); }), {"'u8'", "BOOL", "U8"});
  has(error_of([&] { f->get_uint("i8"); }), {"'i8'", "-100", "does not fit"});
  has(error_of([&] { f->get_int("u64"); }), {"'u64'", "does not fit"});
  has(error_of([&] { f->get_int_array("u64s"); }), {"'u64s'", "does not fit"});
  has(error_of([&] { f->get_int_array("nested"); }), {"'nested'", "ARRAY of ARRAY"});
  has(error_of([&] { f->get_string_array("u64s"); }), {"'u64s'", "ARRAY of U64"});
  has(error_of([&] { f->get_float_array("str"); }), {"'str'", "STRING"});
}

// ---- Tensors and alignment ----

struct TensorCase {
  std::string name;
  std::vector<int64_t> shape;
  DType type;
  size_t bytes;
};

const std::vector<TensorCase> kTensorCases = {
    {"f32", {7, 3}, DType::F32, 7 * 3 * 4},          {"f16", {5}, DType::F16, 5 * 2},
    {"bf16", {3, 2, 2}, DType::BF16, 12 * 2},        {"q8_0", {64, 3}, DType::Q8_0, 2 * 3 * 34},
    {"q4_0", {32, 1, 2, 2}, DType::Q4_0, 4 * 18},    {"q4_1", {96, 2}, DType::Q4_1, 3 * 2 * 20},
};

GgufWriter tensors_writer(uint32_t alignment) {
  GgufWriter w;
  w.set_alignment(alignment);
  w.add_string("general.name", "tiny");
  for (size_t i = 0; i < kTensorCases.size(); ++i) {
    const auto& c = kTensorCases[i];
    auto data = random_bytes(c.bytes, static_cast<uint32_t>(i));
    w.add_tensor(c.name, c.shape, c.type, data.data(), data.size());
  }
  return w;
}

TEST_F(GgufTest, TensorsOfEveryTypeAtEveryAlignment) {
  for (uint32_t alignment : {1u, 8u, 32u, 64u, 256u}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    tensors_writer(alignment).write(path());
    auto f = GgufFile::open(path());
    EXPECT_EQ(f->has("general.alignment"), alignment != 32);
    EXPECT_EQ(f->get_uint("general.alignment", 32), alignment);
    ASSERT_EQ(f->tensors().size(), kTensorCases.size());
    const auto* first = static_cast<const uint8_t*>(f->tensors()[0].data);
    size_t offset = 0;  // expected offset from the first tensor: each one starts aligned
    for (size_t i = 0; i < kTensorCases.size(); ++i) {
      const auto& c = kTensorCases[i];
      const GgufTensor* t = f->find_tensor(c.name);
      ASSERT_EQ(t, &f->tensors()[i]);
      EXPECT_EQ(t->shape, c.shape);
      EXPECT_EQ(t->type, c.type);
      EXPECT_EQ(t->num_bytes, c.bytes);
      EXPECT_EQ(t->data, first + offset);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % alignment, 0u);  // the mapping is page-aligned
      auto expected = random_bytes(c.bytes, static_cast<uint32_t>(i));
      EXPECT_EQ(std::memcmp(t->data, expected.data(), c.bytes), 0);
      offset = (offset + c.bytes + alignment - 1) / alignment * alignment;
    }
    EXPECT_EQ(f->find_tensor("q4_1")->num_elements(), 192);
  }
}

// A hand-crafted v2 file with a non-default alignment stored as U64.
TEST_F(GgufTest, HandCraftedAlignment) {
  Bytes b = header(2, 1, 2);
  b.key("general.alignment", GgufType::U64).put<uint64_t>(8);
  b.tensor("a", {2}, 0, 0).tensor("b", {4}, 1, 8).pad(8).zeros(16);
  auto f = open(b.b);
  EXPECT_EQ(f->version(), 2u);
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(static_cast<const uint8_t*>(f->tensors()[1].data) - static_cast<const uint8_t*>(f->tensors()[0].data), 8);

  Bytes misaligned = header(1, 1);
  misaligned.key("general.alignment", GgufType::U32).put<uint32_t>(8);
  misaligned.tensor("w", {2}, 0, 4).pad(8).zeros(16);
  expect_error(misaligned.b, {"tensor 'w' offset 4", "alignment 8"});
  for (uint32_t bad : {0u, 48u}) {
    Bytes b2 = header(0, 1);
    b2.key("general.alignment", GgufType::U32).put<uint32_t>(bad);
    expect_error(b2.b, {"general.alignment " + std::to_string(bad), "power of two"});
  }
  Bytes wrong_type = header(0, 1);
  wrong_type.key("general.alignment", GgufType::STRING).str("32");
  expect_error(wrong_type.b, {"'general.alignment'", "STRING"});
}

// ---- Corrupt files ----

TEST_F(GgufTest, BadHeaders) {
  expect_error({}, {"empty file"});
  expect_error({'G', 'G', 'M', 'L', 3, 0, 0, 0}, {"bad magic"});
  expect_error(header(0, 0, 1).b, {"version 1", "not supported"});
  expect_error(header(0, 0, 99).b, {"unsupported GGUF version 99"});
  expect_error(header(0, 0, 0).b, {"unsupported GGUF version 0"});
  expect_error(header(0, 0, 3u << 24).b, {"big-endian"});
  EXPECT_TRUE(open(header(0, 0).b)->metadata().empty());
  auto short_header = header(0, 0).b;
  short_header.resize(12);
  expect_error(short_header, {"truncated while reading header"});
  EXPECT_THROW(GgufFile::open(path("does_not_exist.gguf")), GgufError);
  EXPECT_NE(error_of([&] { GgufFile::open(dir_.string()); }).find("not a regular file"), std::string::npos);
}

TEST_F(GgufTest, HugeCountsFailFast) {
  constexpr uint64_t kHuge = 1ull << 60;
  expect_error(header(0, kHuge).b, {"metadata key/value count", "exceeds"});
  expect_error(header(kHuge, 0).zeros(64).b, {"tensor count", "exceeds"});
  expect_error(header(0, 1).put(kHuge).zeros(64).b, {"string length", "metadata key 0"});
  Bytes strings = header(0, 1);
  strings.key("tokens", GgufType::ARRAY).array(GgufType::STRING, kHuge).zeros(64);
  expect_error(strings.b, {"array length", "'tokens'"});
  Bytes nested = header(0, 1);
  nested.key("deep", GgufType::ARRAY);
  for (int i = 0; i < 100; ++i) nested.array(GgufType::ARRAY, 1);
  expect_error(nested.b, {"nested too deeply", "'deep'"});
  Bytes long_name = header(1, 0);
  long_name.put(kHuge).zeros(64);
  expect_error(long_name.b, {"string length", "tensor info 0"});
  Bytes bytes = header(0, 1);
  bytes.key("blob", GgufType::ARRAY).array(GgufType::U8, kHuge).zeros(64);
  expect_error(bytes.b, {"array length " + std::to_string(kHuge), "'blob'", "exceeds"});
  Bytes inner = header(0, 1);
  inner.key("rows", GgufType::ARRAY).array(GgufType::ARRAY, 2).array(GgufType::F32, 0).array(GgufType::F32, kHuge);
  expect_error(inner.zeros(64).b, {"array length", "'rows'", "exceeds"});
}

// Elements of arrays are validated where they lie, not only top-level values.
TEST_F(GgufTest, BadArrayElements) {
  Bytes bools = header(0, 1);
  bools.key("flags", GgufType::ARRAY).array(GgufType::BOOL, 3).put<uint8_t>(1).put<uint8_t>(0).put<uint8_t>(7);
  expect_error(bools.b, {"invalid bool value 7", "'flags'"});
  Bytes types = header(0, 1);
  types.key("rows", GgufType::ARRAY).array(GgufType::ARRAY, 1).array(static_cast<GgufType>(42), 0);
  expect_error(types.b, {"unknown value type 42", "'rows'"});
  Bytes strings = header(0, 1);
  strings.key("words", GgufType::ARRAY).array(GgufType::STRING, 2).str("ok").put<uint64_t>(100).zeros(10);
  expect_error(strings.b, {"string length 100", "'words'"});
  // Eight levels of arrays are allowed, nine are not.
  for (int levels : {8, 9}) {
    Bytes deep = header(0, 1);
    deep.key("deep", GgufType::ARRAY);
    for (int i = 1; i < levels; ++i) deep.array(GgufType::ARRAY, 1);
    deep.array(GgufType::U8, 1).put<uint8_t>(5);
    if (levels == 8) {
      auto f = open(deep.b);
      GgufValue v = *f->find("deep");
      for (int i = 1; i < levels; ++i) v = *std::get<GgufArray>(v.v).begin();
      EXPECT_EQ(std::get<uint64_t>((*std::get<GgufArray>(v.v).begin()).v), 5u);
    } else {
      expect_error(deep.b, {"nested too deeply", "'deep'"});
    }
  }
}

// ---- Heap use bounded by the file size ----

// One key holding `count` elements of elem_type, all zero bytes: zeros are a valid U8, an empty
// string (length 0) and an empty array of U8 (element type 0, count 0). The file is extended
// sparse, so it costs neither time nor heap to write.
struct ZeroArray {
  GgufType elem_type;
  uint64_t count;
  uint64_t elem_bytes;
};

bool is_zero(const GgufValue& v) {
  if (const auto* u = std::get_if<uint64_t>(&v.v)) return *u == 0;
  if (const auto* s = std::get_if<std::string_view>(&v.v)) return s->empty();
  if (const auto* a = std::get_if<GgufArray>(&v.v)) return a->size() == 0;
  return false;
}

// The reader once held a 48-byte value per element: 48x the file for an array of U8, so a 64 MB
// file cost 3 GB before anything could refuse it. Now opening costs nothing per element.
TEST_F(GgufTest, HugeArraysCostNoHeapPerElement) {
  for (ZeroArray c : {ZeroArray{GgufType::U8, 64ull << 20, 1}, ZeroArray{GgufType::STRING, 4ull << 20, 8},
                      ZeroArray{GgufType::ARRAY, 2ull << 20, 12}}) {
    SCOPED_TRACE("array of " + std::to_string(c.count) + " elements of type " +
                 std::to_string(static_cast<uint32_t>(c.elem_type)));
    Bytes b = header(0, 1);
    b.key("big", GgufType::ARRAY).array(c.elem_type, c.count);
    std::string p = write(b.b);
    fs::resize_file(p, b.b.size() + c.count * c.elem_bytes);
    const uint64_t file_bytes = fs::file_size(p);

    test::HeapPeak open_peak;
    auto f = GgufFile::open(p);
    const size_t growth = open_peak.growth();
    EXPECT_LT(growth, 64u * 1024) << "opening a " << file_bytes << "-byte file raised the heap peak by " << growth;

    const auto& array = std::get<GgufArray>(f->find("big")->v);
    EXPECT_EQ(array.elem_type(), c.elem_type);
    EXPECT_EQ(array.size(), c.count);
    test::HeapPeak walk_peak;
    uint64_t n = 0, zeros = 0;
    for (GgufValue v : array) {
      ++n;
      zeros += is_zero(v);
    }
    EXPECT_EQ(n, c.count);
    EXPECT_EQ(zeros, c.count);
    EXPECT_EQ(walk_peak.growth(), 0u) << "iterating decodes in place";
  }
}

// What the reader does keep is a few dozen bytes per key and per tensor info. It weighs most in a
// file made of nothing else, with the shortest keys and names that can be distinct (2 bytes).
TEST_F(GgufTest, DensestFilesCostUnderFiveTimesTheirSize) {
  constexpr uint32_t kCount = 60000;
  auto name = [](uint32_t i) { return std::string{static_cast<char>(i >> 8), static_cast<char>(i & 0xff)}; };
  Bytes b = header(kCount, kCount);
  for (uint32_t i = 0; i < kCount; ++i) b.key(name(i), GgufType::U8).put<uint8_t>(1);
  for (uint32_t i = 0; i < kCount; ++i) b.tensor(name(i), {1}, 0, 0);  // all F32 [1] at offset 0
  std::string p = write(b.pad(32).zeros(32).b);
  const uint64_t file_bytes = fs::file_size(p);

  test::HeapPeak peak;
  auto f = GgufFile::open(p);
  const double ratio = static_cast<double>(peak.growth()) / static_cast<double>(file_bytes);
  EXPECT_LT(ratio, 5.0) << "peak heap " << peak.growth() << " bytes for a " << file_bytes << "-byte file";
  EXPECT_EQ(f->metadata().size(), kCount);
  EXPECT_EQ(f->tensors().size(), kCount);
  EXPECT_EQ(f->get_uint(name(kCount - 1)), 1u);
}

TEST_F(GgufTest, BadTensorInfos) {
  auto one_tensor = [](std::vector<uint64_t> shape, uint32_t type, uint64_t offset, size_t data) {
    Bytes b = header(1, 0);
    return b.tensor("blk.0.attn_q.weight", shape, type, offset).pad(32).zeros(data).b;
  };
  expect_error(one_tensor({}, 0, 0, 64), {"'blk.0.attn_q.weight'", "0 dimensions"});
  expect_error(one_tensor({1, 1, 1, 1, 1}, 0, 0, 64), {"5 dimensions"});
  expect_error(one_tensor({4, 0}, 0, 0, 64), {"invalid dimension 1 = 0"});
  expect_error(one_tensor({1ull << 40, 1ull << 40}, 0, 0, 64), {"invalid dimension 1", "overflows"});
  expect_error(one_tensor({33}, 8, 0, 64), {"row length 33", "block size 32"});
  expect_error(one_tensor({256}, 16, 0, 1024), {"'blk.0.attn_q.weight'", "unsupported type 16 (IQ2_XXS)"});
  expect_error(one_tensor({4}, 0, 16, 64), {"offset 16", "alignment 32"});
  expect_error(one_tensor({16}, 0, 0, 63), {"'blk.0.attn_q.weight' data [", ", ", ") beyond file size"});
  expect_error(one_tensor({4}, 0, ~0ull & ~31ull, 64), {"beyond file size"});
  auto truncated = header(1, 0).tensor("blk.0.attn_q.weight", {4, 4}, 0, 0).b;
  truncated.resize(truncated.size() - 10);
  expect_error(truncated, {"truncated while reading tensor info 0 ('blk.0.attn_q.weight')"});

  Bytes dup_tensor = header(2, 0);
  dup_tensor.tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad(32).zeros(64);
  expect_error(dup_tensor.b, {"duplicate tensor name 'w'"});
  Bytes dup_key = header(0, 2);
  dup_key.key("k", GgufType::U8).put<uint8_t>(1).key("k", GgufType::U8).put<uint8_t>(2);
  expect_error(dup_key.b, {"duplicate metadata key 'k'"});
  Bytes bad_bool = header(0, 1);
  bad_bool.key("flag", GgufType::BOOL).put<uint8_t>(2);
  expect_error(bad_bool.b, {"invalid bool", "'flag'"});
  Bytes bad_type = header(0, 1);
  bad_type.key("x", static_cast<GgufType>(13)).put<uint32_t>(0);
  expect_error(bad_type.b, {"unknown value type 13", "'x'"});
}

// A file with every part (metadata of several kinds, arrays, tensors) in a few hundred bytes.
GgufWriter small_file() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_uint32("llama.block_count", 2);
  w.add_float32("llama.rope.freq_base", 10000.0f);
  w.add_bool("flag", true);
  w.add_string_array("tokenizer.ggml.tokens", {"<s>", "a", "bc"});
  w.add_int32_array("ids", {1, -2});
  auto q = random_bytes(34, 1), v = random_bytes(12, 2);
  w.add_tensor("q", {32}, DType::Q8_0, q.data(), q.size());
  w.add_tensor("v", {3}, DType::F32, v.data(), v.size());
  return w;
}

TEST_F(GgufTest, TruncatedAtEveryByteOffset) {
  auto full = small_file().serialize();
  ASSERT_EQ(open(full)->tensors().size(), 2u);
  for (size_t n = 0; n < full.size(); ++n) {
    SCOPED_TRACE("truncated to " + std::to_string(n) + " of " + std::to_string(full.size()) + " bytes");
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    std::string msg = error_of([&] { open(prefix); });
    EXPECT_TRUE(msg.find("truncated") != std::string::npos || msg.find("beyond file size") != std::string::npos ||
                msg.find("empty file") != std::string::npos)
        << msg;
  }
}

TEST_F(GgufTest, RandomHeaderByteFlipsNeverCrash) {
  auto base = small_file().serialize();
  auto first_data = random_bytes(34, 1);
  auto it = std::search(base.begin(), base.end(), first_data.begin(), first_data.end());
  ASSERT_NE(it, base.end());
  const size_t header_end = static_cast<size_t>(it - base.begin());
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    auto bytes = base;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      bytes[rng() % header_end] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    try {
      auto f = open(bytes);
      unsigned sum = 0;  // touch every tensor byte: the reader promised they are in the file
      for (const auto& t : f->tensors()) {
        for (size_t i = 0; i < t.num_bytes; ++i) sum += static_cast<const uint8_t*>(t.data)[i];
      }
      (void)sum;
      ++parsed;
    } catch (const GgufError&) {
    }
  }
  EXPECT_GT(parsed, 0);  // some flips land in values that stay valid
}

// ---- In memory ----

TEST_F(GgufTest, OpenBytesReadsMemoryInPlace) {
  auto bytes = small_file().serialize();
  auto f = GgufFile::open_bytes(bytes.data(), bytes.size(), "in-memory model");
  EXPECT_EQ(f->path(), "in-memory model");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "a", "bc"}));
  auto inside = [&](const void* p) {
    return p >= static_cast<const void*>(bytes.data()) && p < static_cast<const void*>(bytes.data() + bytes.size());
  };
  EXPECT_TRUE(inside(std::get<std::string_view>(f->find("general.architecture")->v).data()));
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_TRUE(inside(f->tensors()[0].data));
  EXPECT_EQ(std::memcmp(f->find_tensor("q")->data, random_bytes(34, 1).data(), 34), 0);

  auto message = [](const std::vector<uint8_t>& b) {
    return error_of([&] { GgufFile::open_bytes(b.data(), b.size(), "in-memory model"); });
  };
  EXPECT_EQ(message({}), "in-memory model: empty file");
  EXPECT_EQ(message(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 30)).rfind("in-memory model: truncated", 0), 0u);
}

// ---- Writer ----

TEST_F(GgufTest, WriterRejectsInvalidInput) {
  GgufWriter w;
  std::vector<uint8_t> data(64);
  EXPECT_THROW(w.add_tensor("t", {4}, DType::F32, data.data(), 15), GgufError);
  EXPECT_THROW(w.add_tensor("t", {48}, DType::Q4_0, data.data(), 27), GgufError);
  EXPECT_THROW(w.add_tensor("t", {1, 1, 1, 1, 1}, DType::F32, data.data(), 4), GgufError);
  EXPECT_THROW(w.add_tensor("t", {0}, DType::F32, data.data(), 0), GgufError);
  w.add_tensor("t", {4}, DType::F32, data.data(), 16);
  EXPECT_THROW(w.add_tensor("t", {4}, DType::F32, data.data(), 16), GgufError);
  w.add_uint32("k", 1);
  EXPECT_THROW(w.add_string("k", "again"), GgufError);
  EXPECT_THROW(w.add_uint32("general.alignment", 64), GgufError);
  EXPECT_THROW(w.set_alignment(0), GgufError);
  EXPECT_THROW(w.set_alignment(48), GgufError);
  EXPECT_THROW(w.write(path("no_such_dir/x.gguf")), GgufError);
}

// ---- The real model ----

TEST(GgufRealModel, SmolLM2) {
  auto f = GgufFile::open(test::real_model_path());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 49152u);
  const GgufTensor* emb = f->find_tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::Q8_0);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{576, 49152}));
  EXPECT_EQ(emb->num_bytes, size_t{576} / 32 * 34 * 49152);
  const GgufTensor* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::Q4_1);
  EXPECT_EQ(q->shape, (std::vector<int64_t>{576, 576}));
  EXPECT_EQ(q->num_bytes, size_t{576} / 32 * 20 * 576);
}

}  // namespace
}  // namespace flashserve
