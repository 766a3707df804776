// Constrained decoding's cost per token: the allowed-token mask for SmolLM2's 49k vocabulary, at
// every step of JSON documents as the tokenizer splits them (what a model writing them would
// produce) -- any JSON, and a typical nested schema -- and the one-off compile of the grammar's
// per-position token tables.
//
//   build/bench/bench_grammar                # p50 / p99 / max mask time per token in the counters
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/token_masks.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace flashserve {
namespace {

using namespace grammar;

// Nested objects and arrays, prose in strings, numbers, escapes, non-ASCII text.
const std::vector<std::string> kDocuments = {
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.com", "tags": ["math", "poetry", "engines"],
"address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"}, "active": true})",
    R"({"id": 9071, "title": "Quarterly report \"Q3\"", "items": [{"sku": "A-113", "qty": 4, "price": 19.99},
{"sku": "B-7", "qty": 1, "price": 250.0}], "notes": "Delivered to the café on time, no damage.\nSigned."})",
    "{\n  \"query\": \"weather in Paris\",\n  \"results\": [\n    {\"day\": \"Monday\", \"high\": 21, \"low\": 12},\n"
    "    {\"day\": \"Tuesday\", \"high\": 19, \"low\": -2}\n  ],\n  \"units\": \"celsius\"\n}"};

// A typical nested schema (strings with bounds, a format, a pattern, an integer range, an array,
// a nested object), and documents that follow it.
const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 5},
    "address": {
      "type": "object",
      "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                     "zip": {"type": "string", "pattern": "^[0-9A-Z ]{3,10}$"}},
      "required": ["street", "city", "zip"], "additionalProperties": false
    },
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "email", "tags", "address", "active"],
  "additionalProperties": false
})";

const std::vector<std::string> kPeople = {
    R"({"name": "Ada Lovelace", "age": 36, "email": "ada@example.com", "tags": ["math", "poetry", "engines"], "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"}, "active": true})",
    R"({"name": "Grace Hopper", "age": 85, "email": "grace.hopper@navy.mil", "tags": ["compilers", "COBOL"], "address": {"street": "Arlington National Cemetery", "city": "Arlington", "zip": "22211"}, "active": false})",
    "{\n  \"name\": \"Zoë Ångström\",\n  \"age\": 29,\n  \"email\": \"zoe@uni.se\",\n  \"tags\": [],\n  \"address\": {\"street\": \"Kungsgatan 4\", \"city\": \"Uppsala\", \"zip\": \"753 21\"},\n  \"active\": true\n}"};

struct Setup {
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const VocabularyIndex> vocab;
};

const Setup& setup() {
  static const Setup s = [] {
    Setup s;
    const char* env = std::getenv("FLASHSERVE_MODEL");
    auto gguf = GgufFile::open(env && *env ? env : FLASHSERVE_DEFAULT_MODEL);
    s.tokenizer = std::make_unique<Tokenizer>(Tokenizer::data_from_gguf(*gguf));
    Vocabulary v;
    for (int32_t t = 0; t < s.tokenizer->vocab_size(); ++t) {
      v.token_bytes.push_back(s.tokenizer->token_bytes(t, false));
      if (s.tokenizer->is_end_of_generation(t)) v.end_ids.push_back(t);
    }
    s.vocab = std::make_shared<const VocabularyIndex>(std::move(v));
    return s;
  }();
  return s;
}

void BM_CompileJsonGrammar(benchmark::State& state) {
  const Setup& s = setup();
  for (auto _ : state) {
    CompiledGrammar g(parse_gbnf(any_json_object_gbnf()), s.vocab);
    benchmark::DoNotOptimize(&g);
  }
}
BENCHMARK(BM_CompileJsonGrammar)->Unit(benchmark::kMillisecond);

void BM_CompilePersonSchema(benchmark::State& state) {
  const Setup& s = setup();
  const std::string gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(kPersonSchema), {.strict = true});
  for (auto _ : state) {
    CompiledGrammar g(parse_gbnf(gbnf), s.vocab);
    benchmark::DoNotOptimize(&g);
  }
}
BENCHMARK(BM_CompilePersonSchema)->Unit(benchmark::kMillisecond);

// Times every mask while stepping the documents' tokens through `gbnf`.
void masks_along(benchmark::State& state, const std::string& gbnf, const std::vector<std::string>& documents) {
  const Setup& s = setup();
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), s.vocab);
  std::vector<std::vector<int32_t>> docs;
  for (const std::string& d : documents) docs.push_back(s.tokenizer->encode(d, false, false));
  std::vector<double> us;
  TokenBitmask mask;
  for (auto _ : state) {
    for (const auto& tokens : docs) {
      GrammarMatcher m(compiled);
      for (int32_t t : tokens) {
        const auto t0 = std::chrono::steady_clock::now();
        m.fill_mask(mask);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        if (!((mask[size_t(t) >> 5] >> (t & 31)) & 1) || !m.accept(t)) {
          state.SkipWithError("a document token was not allowed");
          return;
        }
      }
    }
  }
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, size_t(q * double(us.size())))]; };
  state.counters["masks"] = double(us.size());
  state.counters["p50_us"] = at(0.5);
  state.counters["p99_us"] = at(0.99);
  state.counters["max_us"] = us.back();
}

void BM_MaskPerTokenAnyJson(benchmark::State& state) { masks_along(state, any_json_object_gbnf(), kDocuments); }
BENCHMARK(BM_MaskPerTokenAnyJson)->Unit(benchmark::kMillisecond);

void BM_MaskPerTokenPersonSchema(benchmark::State& state) {
  masks_along(state, json_schema_to_gbnf(nlohmann::ordered_json::parse(kPersonSchema), {.strict = true}), kPeople);
}
BENCHMARK(BM_MaskPerTokenPersonSchema)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace flashserve
