// libFuzzer target: the grammar compilers on untrusted request fields. The first byte picks the
// input's kind -- GBNF (`grammar`), a regex (`regex`), a JSON Schema (`response_format`) -- and the
// rest is its text. What compiles is turned into token tables for a small vocabulary and followed
// for a few tokens picked from each step's mask. A GrammarError is the right answer to a bad or
// hostile input. Findings: a crash, a sanitizer report, any other exception, an empty mask, or a
// token the mask allowed that the matcher then refuses.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/token_masks.h"
#include "tests/fuzz/finding.h"

namespace {

using namespace flashserve::grammar;

constexpr size_t kMaxInput = 4096;
// Token tables cost a walk of the vocabulary per position: keep each run quick.
constexpr size_t kMaxElements = 20000;
constexpr int kSteps = 24;

std::shared_ptr<const VocabularyIndex> vocab() {
  static const auto v = [] {
    Vocabulary out;
    for (int b = 1; b < 256; ++b) out.token_bytes.push_back(std::string(1, char(b)));
    for (const char* t : {"{\"", "\":", "\",", "ab", "abc", "12", "true", " \"", "\xc3\xa9", "\xe2\x82", "\n  "}) {
      out.token_bytes.push_back(t);
    }
    out.end_ids.push_back(int32_t(out.token_bytes.size()));
    out.token_bytes.push_back("");
    return std::make_shared<const VocabularyIndex>(std::move(out));
  }();
  return v;
}

std::string gbnf_of(uint8_t kind, std::string_view text) {
  switch (kind % 3) {
    case 0: return std::string(text);
    case 1: return regex_to_gbnf(text);
    default: {
      const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return "root ::= \"\"";
      return json_schema_to_gbnf(schema, {.strict = (kind & 4) != 0});
    }
  }
}

void follow(const std::shared_ptr<const CompiledGrammar>& g, std::string_view choices, std::string_view input) {
  GrammarMatcher m(g);
  TokenBitmask mask;
  for (int step = 0; step < kSteps; ++step) {
    m.fill_mask(mask);
    std::vector<int32_t> allowed;
    for (size_t t = 0; t < mask.size() * 32; ++t) {
      if ((mask[t / 32] >> (t % 32)) & 1) allowed.push_back(int32_t(t));
    }
    if (allowed.empty()) flashserve::fuzz::finding("fuzz_grammar", "an empty mask", input);
    const uint8_t pick = step < int(choices.size()) ? uint8_t(choices[size_t(step)]) : uint8_t(step * 37);
    const int32_t token = allowed[pick % allowed.size()];
    if (token == vocab()->vocab.end_ids[0]) return;
    if (!m.accept(token)) {
      // Refusing a token the mask allowed is only right once the grammar is lost to ambiguity,
      // after which the mask holds nothing but end of generation.
      m.fill_mask(mask);
      for (size_t w = 0; w < mask.size(); ++w) {
        const uint32_t end_bit = w == size_t(vocab()->vocab.end_ids[0] / 32) ? uint32_t(1) << (vocab()->vocab.end_ids[0] % 32) : 0;
        if (mask[w] != end_bit) flashserve::fuzz::finding("fuzz_grammar", "the matcher refused a token its mask allowed", input);
      }
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > kMaxInput) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view text = input.substr(1);
  // The text's last bytes double as the walk's choices; they are part of the text too.
  const std::string_view choices = text.substr(text.size() > kSteps ? text.size() - kSteps : 0);
  try {
    const Grammar grammar = parse_gbnf(gbnf_of(data[0], text));
    if (grammar.num_elements() > kMaxElements) return 0;
    follow(std::make_shared<const CompiledGrammar>(grammar, vocab()), choices, input);
  } catch (const GrammarError&) {
  } catch (const std::exception& e) {
    flashserve::fuzz::finding("fuzz_grammar", (std::string("unexpected exception: ") + e.what()).c_str(), input);
  }
  return 0;
}
