// GBNF text to Grammar: what parses, what it means (checked by matching), and the errors a request
// would see for grammars that cannot be used.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace flashserve::grammar {
namespace {

bool matches(const std::string& gbnf, const std::string& text) {
  Matcher m(std::make_shared<const Grammar>(parse_gbnf(gbnf)));
  return m.advance(text) && m.can_end();
}

std::string error_of(const std::string& gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(GbnfParser, LiteralsClassesAndRules) {
  const std::string g = R"(
    # a comment line
    root ::= greeting " " name   # trailing comment
    greeting ::= "hi" | "hello"
    name ::= [A-Z] [a-z]*
  )";
  EXPECT_TRUE(matches(g, "hi Bob"));
  EXPECT_TRUE(matches(g, "hello Z"));
  EXPECT_FALSE(matches(g, "hello bob"));
  EXPECT_FALSE(matches(g, "hey Bob"));
  EXPECT_FALSE(matches(g, "hi Bob "));
}

TEST(GbnfParser, AlternativesContinueOnLinesBeginningWithABar) {
  const std::string g = "root ::= \"a\"\n  | \"b\"\n\n  | \"c\"\nother ::= \"d\"\n";
  for (const char* ok : {"a", "b", "c"}) EXPECT_TRUE(matches(g, ok)) << ok;
  EXPECT_FALSE(matches(g, "d"));
  EXPECT_TRUE(matches("root ::= \"a\" |\n  \"b\"", "b"));
  EXPECT_TRUE(matches("root ::= (\n  \"a\"\n  \"b\"\n)", "ab"));
}

TEST(GbnfParser, Repetitions) {
  EXPECT_TRUE(matches("root ::= \"a\"*", ""));
  EXPECT_TRUE(matches("root ::= \"a\"*", "aaaa"));
  EXPECT_FALSE(matches("root ::= \"a\"+", ""));
  EXPECT_TRUE(matches("root ::= \"ab\"+", "ababab"));
  EXPECT_FALSE(matches("root ::= \"ab\"+", "aba"));
  EXPECT_TRUE(matches("root ::= \"x\" \"y\"? \"z\"", "xz"));
  EXPECT_TRUE(matches("root ::= \"x\" \"y\"? \"z\"", "xyz"));
  for (int n = 0; n <= 5; ++n) {
    const std::string text(size_t(n), 'a');
    EXPECT_EQ(matches("root ::= \"a\"{2,4}", text), n >= 2 && n <= 4) << n;
    EXPECT_EQ(matches("root ::= \"a\"{3}", text), n == 3) << n;
    EXPECT_EQ(matches("root ::= \"a\"{2,}", text), n >= 2) << n;
    EXPECT_EQ(matches("root ::= \"a\"{0,1}", text), n <= 1) << n;
  }
  EXPECT_TRUE(matches("root ::= (\"a\" | \"bc\"){2} \"!\"", "bca!"));
}

TEST(GbnfParser, EscapesAndUnicode) {
  EXPECT_TRUE(matches(R"(root ::= "\"\\\n\t\x41\u00e9\U0001F600")", "\"\\\n\tA\xc3\xa9\xf0\x9f\x98\x80"));
  EXPECT_TRUE(matches("root ::= \"caf\xc3\xa9\"", "caf\xc3\xa9"));
  EXPECT_TRUE(matches("root ::= [\xc3\xa0-\xc3\xbf]+", "\xc3\xa9\xc3\xa0"));
  EXPECT_FALSE(matches("root ::= [\xc3\xa0-\xc3\xbf]+", "e"));
  EXPECT_TRUE(matches(R"(root ::= [^"\\]*)", "any \xe2\x82\xac text"));
  EXPECT_FALSE(matches(R"(root ::= [^"\\]*)", "a\"b"));
  EXPECT_TRUE(matches(R"(root ::= [\-\]]+)", "-]-"));
  EXPECT_TRUE(matches("root ::= [a-]", "-"));  // a trailing '-' is itself
  EXPECT_TRUE(matches("root ::= .", "\xe4\xb8\xad"));
}

TEST(GbnfParser, ErrorsNameTheProblemAndWhere) {
  EXPECT_EQ(error_of("root ::= foo"), "rule 'foo' is used but never defined");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar has no rule named 'root'");
  EXPECT_EQ(error_of(""), "grammar has no rule named 'root'");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar line 2, column 10: rule 'root' is defined twice");
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar line 1, column 14: unterminated literal or class");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar line 1, column 11: unknown escape '\\q'");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "grammar line 1, column 17: repetition {m,n} with n < m");
  EXPECT_EQ(error_of("root ::= [z-a]"), "grammar line 1, column 14: character range with its end before its start");
  EXPECT_EQ(error_of("root = \"a\""), "grammar line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("root ::= (\"a\""), "grammar line 1, column 14: expected ')'");
  EXPECT_EQ(error_of("root ::= \"a\" ) \"b\""), "grammar line 1, column 14: unexpected ')'");
  EXPECT_EQ(error_of("root ::= \"a\"{99999999999}"), "grammar line 1, column 20: repetition count over 1048576");
  EXPECT_NE(error_of("root ::= root \"a\"").find("rule 'root' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x \"b\"\nx ::= \"\" | root").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"?)*").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= " + std::string(300, '(') + "\"a\"" + std::string(300, ')')).find("nested more than 256 deep"),
            std::string::npos);
}

TEST(GbnfParser, HugeRepetitionsAreRefusedNotBuilt) {
  EXPECT_EQ(error_of("root ::= \"a\"{100000,200000}"), "grammar has more than 65536 rules");
  EXPECT_EQ(error_of("root ::= \"a\"{1048576}"), "grammar has more than 1048576 elements");
  EXPECT_EQ(error_of("root ::= (\"a\"{1000}){1000}"), "");  // a repeated group is one rule, used 1000 times
}

TEST(GbnfParser, PrintsWhatItParsed) {
  const Grammar g = parse_gbnf("root ::= \"a\" [0-9] x | \"\"\nx ::= [^\"]");
  EXPECT_EQ(g.to_gbnf(), "root ::= \"a\" [0-9] x | \"\"\nx ::= [\\x00-!#-\\uD7FF\\uE000-\\U0010FFFF]\n");
}

}  // namespace
}  // namespace flashserve::grammar
