// libFuzzer target: the GGUF reader on arbitrary bytes, then every typed getter on whatever opened.
// A GgufError is the right answer to a bad file. Anything else is a finding: a crash, a sanitizer
// report, another exception (libFuzzer reports one escaping as a crash), or the heap growing past
// kHeapFactor times the input while the reader opens it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/model_config.h"
#include "tests/util/heap_counter.h"

namespace {

using namespace flashserve;

// The reader's bound (model/gguf.h), plus room for a GgufFile's fixed cost on tiny inputs.
constexpr size_t kHeapFactor = 5;
constexpr size_t kHeapSlack = 64 * 1024;

template <class Fn>
void allow_gguf_error(Fn fn) {
  try {
    fn();
  } catch (const GgufError&) {
  }
}

// Decodes a value and everything nested in it; the sum only keeps the reads from being dropped.
uint64_t walk(const GgufValue& v) {
  if (const auto* s = std::get_if<std::string_view>(&v.v)) return s->empty() ? 0 : static_cast<uint8_t>(s->back());
  const auto* array = std::get_if<GgufArray>(&v.v);
  if (!array) return v.v.index();
  uint64_t sum = array->size();
  for (GgufValue item : *array) sum += walk(item);
  return sum;
}

uint64_t read_everything(const GgufFile& f) {
  uint64_t sum = 0;
  for (const GgufKeyValue& kv : f.metadata()) {
    sum += walk(kv.value);
    const std::string key(kv.key);
    allow_gguf_error([&] { sum += f.get_uint(key); });
    allow_gguf_error([&] { sum += static_cast<uint64_t>(f.get_int(key)); });
    allow_gguf_error([&] { sum += f.get_float(key) > 0; });
    allow_gguf_error([&] { sum += f.get_bool(key, false); });
    allow_gguf_error([&] { sum += f.get_string(key).size(); });
    allow_gguf_error([&] { sum += f.get_string_array(key).size(); });
    allow_gguf_error([&] { sum += f.get_float_array(key).size(); });
    allow_gguf_error([&] { sum += f.get_int_array(key).size(); });
  }
  for (const GgufTensor& t : f.tensors()) {
    // Names are unique, so the lookup must land on this very tensor.
    if (f.find_tensor(t.name) != &t) std::abort();
    // The reader vouched that the data lies inside the input; ASan knows the input's exact bounds.
    const auto* data = static_cast<const uint8_t*>(t.data);
    if (t.num_bytes > 0) sum += data[0] + data[t.num_bytes - 1];
  }
  allow_gguf_error([&] { sum += static_cast<uint64_t>(read_model_config(f).vocab_size); });
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<GgufFile> f;
  test::HeapPeak peak;
  allow_gguf_error([&] { f = GgufFile::open_bytes(data, size, "fuzz input"); });
  if (peak.growth() > kHeapFactor * size + kHeapSlack) {
    std::fprintf(stderr, "fuzz_gguf: opening a %zu-byte input raised the heap peak by %zu bytes\n", size,
                 peak.growth());
    std::abort();
  }
  if (f) {
    volatile uint64_t sink = read_everything(*f);
    (void)sink;
  }
  return 0;
}
