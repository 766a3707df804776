// Token masks from the per-position tables against the plain answer: step every token's bytes
// through the matcher. Random walks through several grammars on a synthetic vocabulary full of
// tokens that cross rule boundaries and split characters, then on SmolLM2's real vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/token_masks.h"
#include "model/gguf.h"
#include "model/tokenizer.h"
#include "tests/util/test_paths.h"

namespace flashserve::grammar {
namespace {

TokenBitmask brute_force_mask(Matcher& m, const Vocabulary& v) {
  TokenBitmask mask((v.token_bytes.size() + 31) / 32, 0);
  const size_t mark = m.pool().size();
  Stepper stepper(m.grammar(), m.pool());
  for (size_t t = 0; t < v.token_bytes.size(); ++t) {
    const std::string& bytes = v.token_bytes[t];
    if (bytes.empty()) continue;
    MatchState cur = m.state(), next;
    bool ok = true;
    for (char c : bytes) {
      if (!(ok = stepper.step(cur, uint8_t(c), next))) break;
      std::swap(cur, next);
    }
    if (ok) mask[t >> 5] |= uint32_t(1) << (t & 31);
  }
  m.pool().rollback(mark);
  if (m.can_end()) {
    for (int32_t t : v.end_ids) mask[size_t(t) >> 5] |= uint32_t(1) << (t & 31);
  }
  return mask;
}

std::vector<int32_t> allowed(const TokenBitmask& mask, size_t n) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < n; ++t) {
    if ((mask[t >> 5] >> (t & 31)) & 1) out.push_back(int32_t(t));
  }
  return out;
}

// Walks `steps` random allowed tokens, comparing the fast mask with the brute-force one each step.
void random_walks(const std::string& gbnf, const std::shared_ptr<const VocabularyIndex>& vocab, int walks, int steps) {
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf(gbnf), vocab);
  const size_t n = vocab->vocab.token_bytes.size();
  std::mt19937 rng(7);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher fast(compiled);
    Matcher slow(compiled->grammar_ptr());
    TokenBitmask mask;
    std::string text;
    for (int s = 0; s < steps; ++s) {
      fast.fill_mask(mask);
      const std::vector<int32_t> got = allowed(mask, n), want = allowed(brute_force_mask(slow, vocab->vocab), n);
      if (got != want) {
        std::string diff;
        for (int32_t t : got) {
          if (!std::binary_search(want.begin(), want.end(), t)) diff += " +[" + vocab->vocab.token_bytes[size_t(t)] + "]";
        }
        for (int32_t t : want) {
          if (!std::binary_search(got.begin(), got.end(), t)) diff += " -[" + vocab->vocab.token_bytes[size_t(t)] + "]";
        }
        FAIL() << "walk " << w << " step " << s << " after [" << text << "]: allowed tokens differ:" << diff;
      }
      std::vector<int32_t> text_tokens;
      for (int32_t t : got) {
        if (!vocab->vocab.token_bytes[size_t(t)].empty()) text_tokens.push_back(t);
      }
      if (text_tokens.empty()) break;
      const int32_t t = text_tokens[std::uniform_int_distribution<size_t>(0, text_tokens.size() - 1)(rng)];
      ASSERT_TRUE(fast.accept(t));
      ASSERT_TRUE(slow.advance(vocab->vocab.token_bytes[size_t(t)]));
      text += vocab->vocab.token_bytes[size_t(t)];
    }
  }
}

// Every byte alone, plus pieces that straddle rule boundaries, escapes and split characters.
std::shared_ptr<const VocabularyIndex> synthetic_vocab() {
  Vocabulary v;
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, char(b)));
  for (const char* piece : {"{\"", "\":", "\",", "\"}", "\"]", "},", "}]", "[{", "\": \"", "\\n", "\\\"", "\\u00",
                            "true", "false", "null", "12", "3.", ".5", "e+", "-0", "0.", "\n  ", "  ", " \"", "ab",
                            "abc\"", "x\\", "\xc3", "\xa9\"", "caf\xc3", "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac",
                            "\"a\":1", "1}", ",\n", "]\n"}) {
    v.token_bytes.push_back(piece);
  }
  v.token_bytes.push_back("");  // a control token: never allowed
  v.end_ids.push_back(int32_t(v.token_bytes.size()));
  v.token_bytes.push_back("");  // end of generation
  return std::make_shared<const VocabularyIndex>(std::move(v));
}

TEST(TokenMasks, MatchBruteForceOnJson) { random_walks(any_json_object_gbnf(), synthetic_vocab(), 40, 60); }

TEST(TokenMasks, MatchBruteForceOnOtherShapes) {
  const auto vocab = synthetic_vocab();
  random_walks("root ::= item\nitem ::= \"[\" (item (\",\" item)*)? \"]\"", vocab, 20, 30);
  random_walks("root ::= [a-c]{2,5} (\"\\\"\" | \"x\")? [\xc3\xa0-\xc3\xbf\xe2\x82\xac]*", vocab, 20, 30);
  random_walks("root ::= \"ab\" | \"a\" [b-z]* \"\\\"\" | x\nx ::= \"abc\\\"\" x?", vocab, 20, 30);
}

TEST(TokenMasks, EndOfGenerationOnlyWhenComplete) {
  const auto vocab = synthetic_vocab();
  auto compiled = std::make_shared<const CompiledGrammar>(parse_gbnf("root ::= \"ab\""), vocab);
  GrammarMatcher m(compiled);
  const int32_t eos = vocab->vocab.end_ids[0];
  TokenBitmask mask;
  m.fill_mask(mask);
  EXPECT_FALSE((mask[size_t(eos) >> 5] >> (eos & 31)) & 1);
  EXPECT_FALSE(m.accept(eos));
  EXPECT_TRUE(m.accept('a'));
  EXPECT_FALSE(m.accept('a'));
  EXPECT_FALSE(m.must_end());
  EXPECT_TRUE(m.accept('b'));
  EXPECT_TRUE(m.must_end());
  m.fill_mask(mask);
  EXPECT_EQ(allowed(mask, vocab->vocab.token_bytes.size()), std::vector<int32_t>{eos});
  EXPECT_TRUE(m.accept(eos));
}

TEST(TokenMasks, AGrammarTooAmbiguousToFollowEndsTheText) {
  const auto vocab = synthetic_vocab();
  auto compiled = std::make_shared<const CompiledGrammar>(
      parse_gbnf("root ::= e\ne ::= \"a\" e | \"a\" e \"b\" | \"a\" e \"c\" | \"\""), vocab);
  GrammarMatcher m(compiled);
  int accepted = 0;
  while (accepted < 40 && m.accept('a')) ++accepted;
  EXPECT_EQ(accepted, 9);  // the tenth "a" would need more than kMaxParses stacks
  TokenBitmask mask;
  m.fill_mask(mask);
  EXPECT_EQ(allowed(mask, vocab->vocab.token_bytes.size()), vocab->vocab.end_ids);
}

TEST(TokenMasks, TablesPastTheirBoundAreAnError) {
  EXPECT_THROW(CompiledGrammar(parse_gbnf(any_json_object_gbnf()), synthetic_vocab(), CompileBudget(), 1 << 10), GrammarError);
  EXPECT_GT(CompiledGrammar(parse_gbnf(any_json_object_gbnf()), synthetic_vocab()).table_bytes(), size_t(1) << 10);
}

// The budget counts walks of the trie: what it refuses does not depend on the vocabulary's size.
TEST(CompileBudget, RefusesOnceTheSampleProjectsPastTheLimit) {
  CompileBudget b({}, 100);
  b.start(1000, 5000);  // 5,000 positions, each a full walk: 50 times the limit
  for (size_t i = 1; i < CompileBudget::kSampledPositions; ++i) b.spend(1000);
  try {
    b.spend(1000);
    FAIL() << "not refused after the sample";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("would take 5000 walks of the vocabulary (5000 character positions), over "
                                         "the limit of 100"),
              std::string::npos)
        << e.what();
  }
}

TEST(CompileBudget, AGrammarWithinTheLimitIsNeverRefused) {
  CompileBudget b({}, 100);
  b.start(1000, 150);
  for (int i = 0; i < 150; ++i) b.spend(i % 2 ? 1000 : 100);  // 82.5 walks in all
  EXPECT_EQ(b.spent(), 82500u);
}

TEST(CompileBudget, StopsWhenCancelled) {
  int asked = 0;
  CompileBudget b([&] { return ++asked == 3; });
  b.start(1000, 10);
  b.spend(1);
  b.spend(1);
  EXPECT_THROW(b.spend(1), CompileCancelled);
}

// A long repetition is refused after the sample of its positions, not after walking them all; the
// same repetition within the limit compiles.
TEST(TokenMasks, LongRepetitionsAreRefusedAfterASample) {
  int walks = 0;
  const std::string too_long = "root ::= [^\"]{" + std::to_string(CompileBudget::kMaxWalks * 4) + "}";
  try {
    CompiledGrammar(parse_gbnf(too_long), synthetic_vocab(), CompileBudget([&] { return ++walks < 0; }));
    FAIL() << "compiled";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("walks of the vocabulary"), std::string::npos) << e.what();
  }
  EXPECT_EQ(walks, int(CompileBudget::kSampledPositions) - 1);  // asked after each walk but the refused one
  const std::string within = "root ::= [^\"]{" + std::to_string(CompileBudget::kMaxWalks / 2) + "}";
  EXPECT_GT(CompiledGrammar(parse_gbnf(within), synthetic_vocab()).compile_steps(), 0u);
}

TEST(TokenMasks, ACancelledCompileStops) {
  EXPECT_THROW(CompiledGrammar(parse_gbnf(any_json_object_gbnf()), synthetic_vocab(), CompileBudget([] { return true; })),
               CompileCancelled);
}

Vocabulary smollm2_vocabulary() {
  const Tokenizer tok(Tokenizer::data_from_gguf(*GgufFile::open(test::real_model_path())));
  Vocabulary v;
  for (int32_t t = 0; t < tok.vocab_size(); ++t) {
    v.token_bytes.push_back(tok.token_bytes(t, /*render_special=*/false));
    if (tok.is_end_of_generation(t)) v.end_ids.push_back(t);
  }
  return v;
}

TEST(TokenMasks, MatchBruteForceOnTheRealVocabulary) {
  const auto vocab = std::make_shared<const VocabularyIndex>(smollm2_vocabulary());
  ASSERT_GT(vocab->vocab.token_bytes.size(), 49000u);
  random_walks(any_json_object_gbnf(), vocab, 3, 25);
}

}  // namespace
}  // namespace flashserve::grammar
