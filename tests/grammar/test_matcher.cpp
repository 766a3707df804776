// The byte-level matcher: characters split across steps, ambiguity, and all-or-nothing advances.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace flashserve::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(const std::string& text) { return std::make_shared<const Grammar>(parse_gbnf(text)); }

TEST(Matcher, CharactersMayArriveAByteAtATime) {
  const auto g = gbnf("root ::= [\xc3\xa0-\xc3\xbf] \"\xe2\x82\xac\"");  // [à-ÿ] then €
  Matcher m(g);
  EXPECT_TRUE(m.advance("\xc3"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.advance("\x80"));  // U+00C0 is outside the class: rejected at the last byte
  EXPECT_TRUE(m.advance("\xa9\xe2"));
  EXPECT_TRUE(m.advance("\x82"));
  EXPECT_FALSE(m.can_end());
  EXPECT_TRUE(m.advance("\xac"));
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, ALeadByteNoCompletionCouldMatchIsRejectedAtOnce) {
  const auto g = gbnf("root ::= [a-z\xc3\xa0-\xc3\xbf]*");
  Matcher m(g);
  EXPECT_FALSE(m.advance("\xe2"));  // three-byte characters start at U+0800: none is in the class
  EXPECT_FALSE(m.advance("\xc2"));  // U+0080..U+00BF: none either
  EXPECT_TRUE(m.advance("\xc3"));
}

TEST(Matcher, InvalidUtf8NeverMatches) {
  const auto g = gbnf("root ::= .*");
  for (const char* bad : {"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5",
                          "\xff", "\xc3\x41"}) {
    Matcher m(g);
    EXPECT_FALSE(m.advance(bad)) << testing::PrintToString(std::string(bad));
  }
  Matcher m(g);
  EXPECT_TRUE(m.advance("\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xed\x9f\xbf"));  // U+1F600, U+10FFFF, U+D7FF
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, AFailedAdvanceChangesNothing) {
  const auto g = gbnf("root ::= \"abc\" | \"abd\"");
  Matcher m(g);
  EXPECT_TRUE(m.advance("a"));
  EXPECT_FALSE(m.advance("bx"));
  EXPECT_TRUE(m.advance("b"));
  EXPECT_TRUE(m.advance("d"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.advance("d"));
}

TEST(Matcher, AmbiguousGrammarsKeepEveryParse) {
  const auto g = gbnf("root ::= x \"b\" | \"a\"* \"c\"\nx ::= \"a\" | \"aa\"");
  for (const char* ok : {"ab", "aab", "c", "aaac"}) {
    Matcher m(g);
    EXPECT_TRUE(m.advance(ok) && m.can_end()) << ok;
  }
  Matcher m(g);
  EXPECT_FALSE(m.advance("aaab"));
}

TEST(Matcher, RepetitionKeepsTheStackFlat) {
  const auto g = gbnf("root ::= (\"x\" [0-9])*");
  Matcher m(g);
  const size_t before = m.pool().size();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(m.advance("x7"));
  EXPECT_LE(m.pool().size(), before + 4);  // the same few stacks, hash-consed, every round
  EXPECT_TRUE(m.can_end());
}

TEST(Matcher, NestingIsBalanced) {
  const auto g = gbnf("root ::= item\nitem ::= \"[\" (item (\",\" item)*)? \"]\"");
  for (const char* ok : {"[]", "[[]]", "[[],[[]],[]]"}) {
    Matcher m(g);
    EXPECT_TRUE(m.advance(ok) && m.can_end()) << ok;
  }
  Matcher m(g);
  EXPECT_TRUE(m.advance("[[[]"));
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.advance("]]]"));
}

TEST(Matcher, ParsesPastTheLimitAreAnError) {
  // Each "a" may leave a "b" or a "c" owed, or nothing: the distinct stacks grow as 3^n.
  const auto g = gbnf("root ::= e\ne ::= \"a\" e | \"a\" e \"b\" | \"a\" e \"c\" | \"\"");
  Matcher m(g);
  EXPECT_TRUE(m.advance("aaaaaaaaa"));
  EXPECT_THROW(m.advance("a"), GrammarError);
  EXPECT_TRUE(m.advance("cb"));  // the state before the failed advance
}

}  // namespace
}  // namespace flashserve::grammar
