// The compiled-grammar cache: one compile per distinct text, least recently used out first,
// compile errors passed through, and safe under concurrent requests.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar_cache.h"

namespace flashserve::grammar {
namespace {

std::shared_ptr<const VocabularyIndex> bytes_vocab() {
  Vocabulary v;
  for (int b = 0; b < 128; ++b) v.token_bytes.push_back(std::string(1, char(b)));
  return std::make_shared<const VocabularyIndex>(std::move(v));
}

TEST(GrammarCache, CompilesEachTextOnce) {
  GrammarCache cache(bytes_vocab(), 2);
  const auto a = cache.get("root ::= \"a\"");
  EXPECT_EQ(cache.get("root ::= \"a\""), a);
  const auto b = cache.get("root ::= \"b\"");
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.get("root ::= \"a\""), a);  // now the most recent
  cache.get("root ::= \"c\"");                // evicts b, the least recent
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get("root ::= \"a\""), a);
  EXPECT_NE(cache.get("root ::= \"b\""), b);
}

TEST(GrammarCache, TableBytesAreBounded) {
  const std::string a = "root ::= [a-z]+", b = "root ::= [0-9]+";
  const size_t one = CompiledGrammar(parse_gbnf(a), bytes_vocab()).table_bytes();
  ASSERT_GT(one, 0u);
  GrammarCache cache(bytes_vocab(), 64, one + one / 2);  // room for one such grammar, not two
  cache.get(a);
  cache.get(b);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_LE(cache.bytes(), one + one / 2);
}

TEST(GrammarCache, ErrorsAreNotCached) {
  GrammarCache cache(bytes_vocab());
  EXPECT_THROW(cache.get("root ::= nothing"), GrammarError);
  EXPECT_THROW(cache.get("root ::= nothing"), GrammarError);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(GrammarCache, ConcurrentRequestsShareOneEntry) {
  GrammarCache cache(bytes_vocab());
  std::vector<std::shared_ptr<const CompiledGrammar>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = cache.get("root ::= [a-z]+ \"!\""); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.size(), 1u);
  for (const auto& g : got) EXPECT_EQ(g, cache.get("root ::= [a-z]+ \"!\""));
}

}  // namespace
}  // namespace flashserve::grammar
