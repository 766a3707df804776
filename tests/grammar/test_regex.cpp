// Regex (JSON Schema `pattern`) to GBNF: the grammar accepts exactly what std::regex_match accepts
// (ECMAScript, ASCII), Unicode beyond what std::regex can check, the errors a request would see,
// and repetitions of patterns that match the empty string.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace flashserve::grammar {
namespace {

using namespace std::string_literals;

std::shared_ptr<const Grammar> compile(const std::string& pattern) {
  return std::make_shared<const Grammar>(parse_gbnf(regex_to_gbnf(pattern), "root"));
}

bool accepts(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  Matcher m(g);
  return m.advance(text) && m.can_end();
}

bool matches(const std::string& pattern, const std::string& text) { return accepts(compile(pattern), text); }

std::string error_of(const std::string& pattern) {
  try {
    regex_to_gbnf(pattern);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

// Every string over `alphabet` up to the length where that stays near 4000, then longer random ones.
std::vector<std::string> texts_over(const std::string& alphabet) {
  std::vector<std::string> out{""}, level{""};
  while (out.size() + level.size() * alphabet.size() <= 4000) {
    std::vector<std::string> next;
    for (const std::string& s : level) {
      for (char c : alphabet) next.push_back(s + c);
    }
    out.insert(out.end(), next.begin(), next.end());
    level = std::move(next);
  }
  std::mt19937 rng(20240611);
  for (int i = 0; i < 3000; ++i) {
    std::string s(rng() % 11, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    out.push_back(s);
  }
  return out;
}

struct DifferentialCase {
  std::string pattern;
  std::string alphabet;  // the pattern's characters and their neighbours just outside each class
};

void PrintTo(const DifferentialCase& c, std::ostream* os) { *os << c.pattern; }

class RegexVsStdRegex : public testing::TestWithParam<DifferentialCase> {};

TEST_P(RegexVsStdRegex, AcceptsExactlyWhatStdRegexMatches) {
  const DifferentialCase& c = GetParam();
  const std::regex expected(c.pattern, std::regex::ECMAScript);
  const auto g = compile(c.pattern);
  int accepted = 0, rejected = 0;
  for (const std::string& text : texts_over(c.alphabet)) {
    const bool ok = accepts(g, text);
    ASSERT_EQ(ok, std::regex_match(text, expected))
        << "pattern " << c.pattern << ", text " << testing::PrintToString(text) << "\n" << regex_to_gbnf(c.pattern);
    ++(ok ? accepted : rejected);
  }
  EXPECT_GT(accepted + rejected, 3000);
  EXPECT_GT(accepted, 0);  // both outcomes occur: the alphabet exercises the pattern
  EXPECT_GT(rejected, 0);
}

const DifferentialCase kDifferentialCases[] = {
    // literals, alternation, groups
    {"abc", "abcd"},
    {"a|b|cd", "abcd"},
    {"(ab|c)d", "abcd"},
    {"(?:ab|c)+", "abc"},
    {"x(?:y|z)*?w", "xyzw"},
    {"a|", "ab"},
    {"|a", "ab"},
    {"(a|b|)c", "abc"},
    {"", "a"},
    // quantifiers, greedy and lazy
    {"a*", "ab"},
    {"a+b?", "abc"},
    {"(ab)*c", "abc"},
    {"a{3}", "ab"},
    {"a{2,}", "ab"},
    {"a{0}b", "ab"},
    {"a{1,3}b{0,2}", "abc"},
    {"(a|bc){2,3}", "abc"},
    {"a*?b+?c??", "abc"},
    {"a{2,3}?b{2,}?", "ab"},
    // classes and ranges, with the characters on either side of each range
    {"[a-c]+", "`abcd"},
    {"[^a-c]x", "`abcdx"},
    {"[a-cx-z]{2}", "`abcdwxyz{"},
    {"[abc-]", "abc-d"},
    {"[-a]|[b-]", "-abc"},
    {"[--/]", ",-./0"},
    {"[a-b-d]", "abcd-"},
    {"[\\]\\-\\^]x", "]-^\\x"},
    // shorthands, outside and inside classes, negated too
    {"\\d+", "09/:a"},
    {"\\D\\d", "0/:9"},
    {"\\w+", "azAZ09_@[`{/:"},
    {"\\W", "a_@ .["},
    {"\\s*x", " \t\n\v\f\rxa"},
    {"\\S+", " \t\rab"},
    {"[\\W\\d]+", "a_0@9 "},
    {"[^\\s\\d]", "a 0\t\r"},
    {"[\\w.-]+@[\\w-]+", "a_.-@#"},
    // the dot stops at line terminators
    {".", "a\n\rb"},
    {"a.+c", "ac\n\r"},
    // escapes
    {"(\\.|\\*|\\+|\\?|\\(|\\)|\\[|\\]|\\{|\\}|\\||\\/|\\\\|\\^|\\$|\\-)+", ".*+?()[]{}|/\\^$-a"},
    {"[.*+?()|$^]+", ".*+?()|$^a"},
    {"\\x41\\u0042[\\x43-\\x45]", "@ABCDEF"},
    {"(\\t|\\n|\\r|\\f|\\v|\\0)+", "\t\n\r\f\v\0a"s},
    {"[\\b]", "\bb"},
    // anchors at the ends
    {"^ab$", "ab"},
    {"^a|b$", "ab"},
    {"^(a|b)*$", "abc"},
    // repetitions of patterns that match the empty string
    {"(a?)*", "ab"},
    {"(a*)+b", "ab"},
    {"(|b){2,}", "ab"},
    {"(a?b?)*c", "abc"},
    {"(a?b?){2,3}", "ab"},
    {"(a*|b)*", "abc"},
    {"((a|)(b|)){1,2}c", "abc"},
    {"(a{0,2}b*){2}", "ab"},
    {"(()|a)+", "ab"},
    {"(a?b?c?){0,2}d", "abcd"},
};

INSTANTIATE_TEST_SUITE_P(Patterns, RegexVsStdRegex, testing::ValuesIn(kDifferentialCases));

TEST(Regex, Utf8Literals) {
  EXPECT_TRUE(matches("é+", "ééé"));
  EXPECT_FALSE(matches("é+", "e"));
  EXPECT_TRUE(matches("日本語|€", "日本語"));
  EXPECT_TRUE(matches("日本語|€", "€"));
  EXPECT_FALSE(matches("日本語|€", "日本"));
}

TEST(Regex, ClassesWithNonAsciiRanges) {
  const auto g = compile("[à-ÿ]+");
  EXPECT_TRUE(accepts(g, "éàÿ"));
  EXPECT_FALSE(accepts(g, "a"));
  EXPECT_FALSE(accepts(g, "\xc3\x9f"));  // U+00DF, just below
  EXPECT_FALSE(accepts(g, "Ā"));         // U+0100, just above
  EXPECT_TRUE(matches("[\\u0400-\\u04FF]+", "привет"));
  EXPECT_FALSE(matches("[^a]", "a"));
  EXPECT_TRUE(matches("[^a]", "€"));
  EXPECT_TRUE(matches("[^a]", "😀"));
}

TEST(Regex, DotMatchesAnyCodePointButLineTerminators) {
  const auto g = compile(".");
  for (const char* ok : {"a", "é", "€", "😀", "\t", "\u2027", "\u202a"}) EXPECT_TRUE(accepts(g, ok)) << ok;
  for (const char* bad : {"\n", "\r", "\u2028", "\u2029", "ab", ""}) EXPECT_FALSE(accepts(g, bad)) << bad;
}

TEST(Regex, UnicodeEscapes) {
  EXPECT_TRUE(matches("\\u00e9\\u{1F600}\\u{41}", "é😀A"));
  EXPECT_TRUE(matches("\\uD83D\\uDE00", "😀"));  // a UTF-16 surrogate pair is one character
  EXPECT_FALSE(matches("\\uD83D", "😀"));         // a lone surrogate matches nothing UTF-8 can hold
  EXPECT_TRUE(matches("[\\u{1F600}-\\u{1F64F}]", "🙂"));
  EXPECT_FALSE(matches("[\\u{1F600}-\\u{1F64F}]", "🚀"));
}

TEST(Regex, ShorthandsUseEcmaDefinitions) {
  for (const char* space : {" ", "\t", "\u00a0", "\u1680", "\u2000", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
                            "\u3000", "\ufeff"}) {
    EXPECT_TRUE(matches("\\s", space)) << space;
    EXPECT_FALSE(matches("\\S", space)) << space;
  }
  EXPECT_FALSE(matches("\\s", "\u200b"));
  EXPECT_FALSE(matches("\\w", "é"));
  EXPECT_TRUE(matches("\\W", "é"));
  EXPECT_FALSE(matches("\\d", "٣"));  // Arabic-Indic digit three: \d is ASCII only
  EXPECT_TRUE(matches("[\\W\\d]", "é"));
}

TEST(Regex, EmitsAsciiGbnfWithEscapes) {
  const std::string g = regex_to_gbnf("é\\u{1F600}[\\0-\\x1f]\"\\\\");
  for (char c : g) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << g;
  EXPECT_EQ(g, "root ::= \"\\xE9\\U0001F600\" [\\x00-\\x1F] \"\\\"\\\\\"\n");
}

TEST(Regex, ControlEscapes) {  // which std::regex reads otherwise
  EXPECT_TRUE(matches("\\cJ\\ca[\\cZ]", "\n\x01\x1a"));
  EXPECT_FALSE(matches("\\cJ", "J"));
}

TEST(Regex, EmptyClassesMatchNothingOrEverything) {
  EXPECT_FALSE(matches("[]a", "a"));
  EXPECT_TRUE(matches("a|[]", "a"));
  EXPECT_TRUE(matches("[]*a", "a"));
  EXPECT_TRUE(matches("[^]", "\n"));
  EXPECT_TRUE(matches("[^]", "😀"));
}

TEST(Regex, LoneClosingBracketsAreCharacters) {
  EXPECT_TRUE(matches("a]", "a]"));
  EXPECT_TRUE(matches("a}", "a}"));
  EXPECT_TRUE(matches("[a-z]+}", "ab}"));
}

TEST(Regex, NamedGroupsOnlyGroup) {
  const auto g = compile("(?<year>\\d{4})-(?<month>\\d{2})");
  EXPECT_TRUE(accepts(g, "2024-06"));
  EXPECT_FALSE(accepts(g, "2024-6"));
  EXPECT_TRUE(matches("(?<$x_1>a)+", "aa"));
}

TEST(Regex, NullableRepetitionsMakeNoLeftRecursion) {
  // Each would be a left-recursive star if written naively; compile() fails on left recursion.
  for (const char* p : {"(a?)*", "(a*)+", "(a*)*", "(|b){2,}", "(a?b?)*", "((a?)*)*", "()*", "(|)+", "(()|())*",
                        "(a*b*)*c", "(a?){3,}", "((a|)(b|)(c|))+", "(a{0,3}){2,}", "(a*?)+?"}) {
    SCOPED_TRACE(p);
    ASSERT_NO_THROW(compile(p));
  }
  // Nested stars std::regex takes exponential time over.
  EXPECT_TRUE(matches("((a?)*)*b", std::string(40, 'a') + "b"));
  EXPECT_TRUE(matches("((a?)*)*b", "b"));
  EXPECT_FALSE(matches("((a?)*)*b", std::string(40, 'a')));
  EXPECT_TRUE(matches("()*", ""));
  EXPECT_FALSE(matches("()*", "a"));
  EXPECT_TRUE(matches("(|)+", ""));
  EXPECT_TRUE(matches("(a*b*)*c", "abbaabc"));
  EXPECT_TRUE(matches("(a?){3,}", ""));
  EXPECT_TRUE(matches("(a?){3,}", "aaaaa"));
  EXPECT_TRUE(matches("((a|)(b|)(c|))+", "cbacab"));
  EXPECT_FALSE(matches("((a|)(b|)(c|))+", "cbad"));
}

TEST(Regex, NullableSequencesUnderRepetitionStayLinear) {
  std::string pattern = "(";
  for (int i = 0; i < 60; ++i) pattern += "x?";
  pattern += "y?){2}";
  const std::string g = regex_to_gbnf(pattern);
  EXPECT_LT(g.size(), 60u * 64) << "the tails are shared, not copied";
  const auto grammar = std::make_shared<const Grammar>(parse_gbnf(g));
  EXPECT_TRUE(accepts(grammar, std::string(60, 'x') + "y" + std::string(60, 'x') + "y"));
  EXPECT_TRUE(accepts(grammar, "xyxy"));
  EXPECT_FALSE(accepts(grammar, std::string(121, 'x')));
  EXPECT_FALSE(accepts(grammar, "yyy"));
}

TEST(Regex, BoundedRepetitionUsesGbnfCounts) {
  EXPECT_EQ(regex_to_gbnf("(ab){2,5}c{3}d{4,}"), "root ::= \"ab\"{2,5} \"c\"{3} \"d\"{4,}\n");
  const auto g = compile("[0-9]{10000}");
  EXPECT_TRUE(accepts(g, std::string(10000, '7')));
  EXPECT_FALSE(accepts(g, std::string(9999, '7')));
}

TEST(Regex, LongClassesGetOneRuleEach) {
  const std::string g = regex_to_gbnf("\\s+x\\s*[\\s]\\S");
  EXPECT_EQ(g,
            "root ::= root-class-1+ \"x\" root-class-1* root-class-1 root-class-2\n"
            "root-class-1 ::= [\\t-\\r \\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF]\n"
            "root-class-2 ::= [^\\t-\\r \\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\uFEFF]\n");
  EXPECT_EQ(regex_to_gbnf("[^\"\\\\]*"), "root ::= [^\\\"\\\\]*\n");  // negations stay short
}

TEST(Regex, TwoPatternsInOneGrammar) {
  const std::string g = "root ::= \"id:\" id \" zip:\" zip\n" + regex_to_gbnf("[a-z]\\w*\\s?(x|yz)+", "id") +
                        regex_to_gbnf("\\d{5}(-\\d{4})?\\s?(a|bc)*", "zip");
  std::istringstream lines(g);
  for (std::string line; std::getline(lines, line);) {
    const std::string rule = line.substr(0, line.find(' '));
    EXPECT_TRUE(rule == "root" || rule == "id" || rule == "zip" || rule.rfind("id-", 0) == 0 ||
                rule.rfind("zip-", 0) == 0)
        << rule;
  }
  const auto grammar = std::make_shared<const Grammar>(parse_gbnf(g));
  EXPECT_TRUE(accepts(grammar, "id:ab_9 x zip:12345-6789 abc"));
  EXPECT_TRUE(accepts(grammar, "id:qyz zip:00000"));
  EXPECT_FALSE(accepts(grammar, "id:9a zip:12345"));
  EXPECT_FALSE(accepts(grammar, "id:a zip:1234"));
}

TEST(Regex, DeepNestingIsSplitIntoRules) {
  std::string pattern;
  for (int i = 0; i < 200; ++i) pattern += "(a";
  for (int i = 0; i < 200; ++i) pattern += ")?";
  const std::string gbnf = regex_to_gbnf(pattern);
  EXPECT_GE(std::count(gbnf.begin(), gbnf.end(), '\n'), 200 / 32) << "a rule every 32 levels";
  const auto g = std::make_shared<const Grammar>(parse_gbnf(gbnf));
  EXPECT_TRUE(accepts(g, ""));
  EXPECT_TRUE(accepts(g, std::string(200, 'a')));
  EXPECT_FALSE(accepts(g, std::string(201, 'a')));
}

TEST(Regex, RunsInsideRunsAreFlattened) {
  // Each would parse a text many ways, and the matcher would keep a stack for every parse.
  EXPECT_EQ(regex_to_gbnf("(a+)*"), "root ::= \"a\"*\n");
  EXPECT_EQ(regex_to_gbnf("(a+){2,3}"), "root ::= \"a\"{2,}\n");
  EXPECT_EQ(regex_to_gbnf("(a|(a|b+)+)+"), "root ::= [ab]+\n");
  EXPECT_EQ(regex_to_gbnf("(x|yz+)*"), "root ::= (\"x\" | \"y\" \"z\"+)*\n");  // z+ is not a whole alternative
  std::string pattern;
  for (int i = 0; i < 100; ++i) pattern += "(a|";
  pattern += "b";
  for (int i = 0; i < 100; ++i) pattern += ")+";
  EXPECT_EQ(regex_to_gbnf(pattern), "root ::= [ab]+\n");
}

TEST(Regex, Errors) {
  const std::pair<std::string, std::string> cases[] = {
      {"(?=a)", "regex: lookahead '(?=' is not supported at position 0"},
      {"a(?!b)", "regex: negative lookahead '(?!' is not supported at position 1"},
      {"(?<=a)b", "regex: lookbehind '(?<=' is not supported at position 0"},
      {"(?<!a)b", "regex: negative lookbehind '(?<!' is not supported at position 0"},
      {"(a)\\1", "regex: backreference \\1 is not supported at position 3"},
      {"(?<n>a)\\k<n>", "regex: backreference \\k<name> is not supported at position 7"},
      {"\\bword", "regex: word boundary \\b is not supported at position 0"},
      {"a\\B", "regex: word boundary \\B is not supported at position 1"},
      {"(?i)abc", "regex: group '(?i' is not supported: only (?: and (?<name> groups are at position 0"},
      {"a(?-i:b)", "regex: group '(?-' is not supported: only (?: and (?<name> groups are at position 1"},
      {"(?P<n>x)", "regex: group '(?P' is not supported: only (?: and (?<name> groups are at position 0"},
      {"\\p{L}", "regex: unicode property escape \\p{...} is not supported at position 0"},
      {"x\\P{Lu}", "regex: unicode property escape \\P{...} is not supported at position 1"},
      {"a^b", "regex: '^' is only supported at the start of the pattern at position 1"},
      {"(^a)", "regex: '^' is only supported at the start of the pattern at position 1"},
      {"a$b", "regex: '$' is only supported at the end of the pattern at position 1"},
      {"(a$)", "regex: '$' is only supported at the end of the pattern at position 2"},
      {"*a", "regex: quantifier '*' has nothing to repeat at position 0"},
      {"a**", "regex: quantifier '*' has nothing to repeat at position 2"},
      {"a|+b", "regex: quantifier '+' has nothing to repeat at position 2"},
      {"(?)", "regex: group '(?)' is not supported: only (?: and (?<name> groups are at position 0"},
      {"^?", "regex: quantifier '?' has nothing to repeat at position 1"},
      {"{2}", "regex: quantifier '{' has nothing to repeat at position 0"},
      {"a{2}{3}", "regex: quantifier '{' has nothing to repeat at position 4"},
      {"a{10001}", "regex: repetition count above 10000 at position 2"},
      {"a{1,99999}", "regex: repetition count above 10000 at position 4"},
      {"a{3,2}", "regex: repetition {3,2} has its maximum below its minimum at position 1"},
      {"a{", "regex: '{' that starts no repetition {n}, {n,} or {n,m} (write \\{ for the character) at position 1"},
      {"a{x}", "regex: '{' that starts no repetition {n}, {n,} or {n,m} (write \\{ for the character) at position 1"},
      {"a{,3}", "regex: '{' that starts no repetition {n}, {n,} or {n,m} (write \\{ for the character) at position 1"},
      {"(ab", "regex: '(' is never closed at position 0"},
      {"ab)", "regex: unmatched ')' at position 2"},
      {"[ab", "regex: '[' is never closed at position 0"},
      {"[a-", "regex: '[' is never closed at position 0"},
      {"[z-a]", "regex: range ends before it starts at position 2"},
      {"[\\d-z]", "regex: a class escape like \\d cannot bound a range at position 3"},
      {"[a-\\w]", "regex: a class escape like \\d cannot bound a range at position 2"},
      {"\\q", "regex: unknown escape \\q at position 0"},
      {"\\Z", "regex: unknown escape \\Z at position 0"},
      {"abc\\", "regex: pattern ends with a lone backslash at position 3"},
      {"\\x4", "regex: \\x needs two hex digits at position 0"},
      {"\\u12", "regex: \\u needs four hex digits or {hex digits} at position 0"},
      {"\\u{110000}", "regex: \\u{...} beyond U+10FFFF at position 0"},
      {"\\u{}", "regex: \\u{ needs hex digits and a closing '}' at position 0"},
      {"\\u{41", "regex: \\u{ needs hex digits and a closing '}' at position 0"},
      {"\\01", "regex: octal escape is not supported at position 0"},
      {"\\c1", "regex: \\c must be followed by a letter at position 0"},
      {"(?<1a>x)", "regex: group name in '(?<name>' must be letters, digits, _ or $, not starting with a digit at position 0"},
      {"(?<a-b>x)", "regex: group name in '(?<name>' must be letters, digits, _ or $, not starting with a digit at position 0"},
      {"é日(?=a)", "regex: lookahead '(?=' is not supported at position 2"},  // characters, not bytes
      {"a\xff", "regex: invalid UTF-8 at position 1"},
      {"\xc0\x80", "regex: invalid UTF-8 at position 0"},  // overlong
  };
  for (const auto& [pattern, message] : cases) EXPECT_EQ(error_of(pattern), message) << pattern;
}

TEST(Regex, NestingDepthIsBounded) {
  EXPECT_NO_THROW(regex_to_gbnf(std::string(256, '(') + "a" + std::string(256, ')')));
  EXPECT_EQ(error_of(std::string(257, '(') + "a" + std::string(257, ')')),
            "regex: groups nested more than 256 deep at position 256");
}

TEST(Regex, RuleNameMustBeAGbnfName) {
  try {
    regex_to_gbnf("a", "bad name");
    FAIL();
  } catch (const GrammarError& e) {
    EXPECT_STREQ(e.what(), "regex: 'bad name' is not a GBNF rule name");
  }
}

}  // namespace
}  // namespace flashserve::grammar
