// Writes the seed corpus of fuzz_gguf: small valid files of each kind the reader accepts, and
// truncated copies. Seeds only point the fuzzer at the deep paths; scripts/fuzz.sh --merge adds
// the inputs it finds beside them. Usage: make_gguf_corpus FOLDER
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/gguf.h"
#include "model/model_config.h"
#include "tests/util/gguf_bytes.h"

namespace {

using namespace flashserve;
using kernels::DType;

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 37 + 11);
  return v;
}

void add_tensor(GgufWriter& w, const std::string& name, const std::vector<int64_t>& shape, DType type, size_t bytes) {
  auto data = pattern(bytes);
  w.add_tensor(name, shape, type, data.data(), data.size());
}

// Every kind the writer has, no tensors.
GgufWriter metadata_only() {
  GgufWriter w;
  w.add_uint32("a.u32", 4000000000u);
  w.add_int32("a.i32", -7);
  w.add_float32("a.f32", 0.25f);
  w.add_bool("a.bool", true);
  w.add_string("a.str", "caf\xc3\xa9");
  w.add_string_array("a.strs", {"x", "", "yz"});
  w.add_float32_array("a.f32s", {1.5f, -2.0f});
  w.add_int32_array("a.i32s", {3, -4, 5});
  return w;
}

// One tensor of each supported type, at a non-default alignment.
GgufWriter tensors_aligned_8() {
  GgufWriter w;
  w.set_alignment(8);
  add_tensor(w, "f32", {4, 2}, DType::F32, 32);
  add_tensor(w, "f16", {4}, DType::F16, 8);
  add_tensor(w, "bf16", {2, 2}, DType::BF16, 8);
  add_tensor(w, "q8_0", {32}, DType::Q8_0, 34);
  add_tensor(w, "q4_0", {32, 1, 1, 1}, DType::Q4_0, 18);
  add_tensor(w, "q4_1", {32}, DType::Q4_1, 20);
  return w;
}

// Enough of a Llama model for read_model_config to succeed: hyperparameters, a tokenizer, an embedding.
GgufWriter tiny_llama() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "seed");
  w.add_uint32("llama.block_count", 1);
  w.add_uint32("llama.embedding_length", 8);
  w.add_uint32("llama.feed_forward_length", 16);
  w.add_uint32("llama.context_length", 64);
  w.add_uint32("llama.attention.head_count", 2);
  w.add_uint32("llama.attention.head_count_kv", 1);
  w.add_float32("llama.rope.freq_base", 10000.0f);
  w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "smollm");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"});
  w.add_int32_array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.add_string_array("tokenizer.ggml.merges", {"a b"});
  w.add_uint32("tokenizer.ggml.eos_token_id", 3);
  add_tensor(w, "token_embd.weight", {8, 4}, DType::F32, 8 * 4 * 4);
  return w;
}

// Every value type, arrays of each, and arrays of arrays, which the writer never produces.
std::vector<uint8_t> every_type(uint32_t version) {
  test::GgufBytes b = test::gguf_header(0, 19, version);
  b.key("u8", GgufType::U8).put<uint8_t>(200);
  b.key("i8", GgufType::I8).put<int8_t>(-100);
  b.key("u16", GgufType::U16).put<uint16_t>(60000);
  b.key("i16", GgufType::I16).put<int16_t>(-30000);
  b.key("u32", GgufType::U32).put<uint32_t>(4000000000u);
  b.key("i32", GgufType::I32).put<int32_t>(-2000000000);
  b.key("f32", GgufType::F32).put<float>(1.5f);
  b.key("bool", GgufType::BOOL).put<uint8_t>(1);
  b.key("str", GgufType::STRING).str("hello");
  b.key("u64", GgufType::U64).put<uint64_t>((1ull << 63) + 5);
  b.key("i64", GgufType::I64).put<int64_t>(-(1ll << 40));
  b.key("f64", GgufType::F64).put<double>(0.1);
  b.key("u8s", GgufType::ARRAY).array(GgufType::U8, 3).put<uint8_t>(1).put<uint8_t>(2).put<uint8_t>(255);
  b.key("i16s", GgufType::ARRAY).array(GgufType::I16, 2).put<int16_t>(-1).put<int16_t>(7);
  b.key("u64s", GgufType::ARRAY).array(GgufType::U64, 2).put<uint64_t>(7).put<uint64_t>(~0ull);
  b.key("f64s", GgufType::ARRAY).array(GgufType::F64, 1).put<double>(-0.5);
  b.key("bools", GgufType::ARRAY).array(GgufType::BOOL, 2).put<uint8_t>(0).put<uint8_t>(1);
  b.key("strs", GgufType::ARRAY).array(GgufType::STRING, 2).str("a").str("bc");
  b.key("nested", GgufType::ARRAY).array(GgufType::ARRAY, 2);
  b.array(GgufType::STRING, 1).str("in");
  b.array(GgufType::ARRAY, 1).array(GgufType::I32, 1).put<int32_t>(-3);
  return b.b;
}

void write(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw GgufError(path.string() + ": write failed");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FOLDER\n", argv[0]);
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  // A valid seed that stopped opening would quietly shrink what the fuzzer starts from.
  auto write_valid = [&](const std::string& name, const std::vector<uint8_t>& bytes) {
    write(dir / name, bytes);
    return GgufFile::open((dir / name).string());
  };
  write_valid("seed_metadata", metadata_only().serialize());
  write_valid("seed_tensors_aligned_8", tensors_aligned_8().serialize());
  write_valid("seed_every_type_v2", every_type(2));
  write_valid("seed_every_type_v3", every_type(3));
  const std::vector<uint8_t> llama = tiny_llama().serialize();
  read_model_config(*write_valid("seed_tiny_llama", llama));
  for (size_t parts : {4, 2}) {
    std::vector<uint8_t> head(llama.begin(), llama.begin() + static_cast<std::ptrdiff_t>(llama.size() / parts));
    write(dir / ("seed_tiny_llama_truncated_1_" + std::to_string(parts)), head);
  }
  std::vector<uint8_t> no_data(llama.begin(), llama.end() - 8);  // the embedding ends past the file
  write(dir / "seed_tiny_llama_short_tensor", no_data);
  return 0;
}
