// Copying small rules per use must not change the language: random texts are matched by the
// original and the rewritten grammar alike, and the rewrite stays bounded.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/rule_inlining.h"

namespace flashserve::grammar {
namespace {

// Texts the original grammar accepts (random walks over an alphabet), plus random near misses.
void same_language(const std::string& gbnf, const std::string& alphabet) {
  const auto original = std::make_shared<const Grammar>(parse_gbnf(gbnf));
  const auto inlined = std::make_shared<const Grammar>(inline_small_rules(*original));
  std::mt19937 rng(3);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  for (int walk = 0; walk < 300; ++walk) {
    Matcher a(original), b(inlined);
    std::string text;
    for (int step = 0; step < 40; ++step) {
      const char c = alphabet[pick(rng)];
      const bool ok_a = Matcher(a).advance(std::string(1, c));
      ASSERT_EQ(ok_a, Matcher(b).advance(std::string(1, c))) << text << c;
      if (!ok_a) continue;
      a.advance(std::string(1, c));
      b.advance(std::string(1, c));
      text += c;
      ASSERT_EQ(a.can_end(), b.can_end()) << text;
    }
  }
}

TEST(RuleInlining, KeepsTheLanguage) {
  same_language(any_json_object_gbnf(), "{}[],:\" \n\tabc\\u019e.-+truefalsn");
  same_language("root ::= x x y\nx ::= \"a\" | \"ab\" y\ny ::= \"c\"* | \"d\"", "abcd");
  same_language("root ::= t\nt ::= \"(\" t* \")\" | w\nw ::= [a-c]{1,3}", "()abcd");
}

TEST(RuleInlining, SharedSmallRulesGetACopyPerUse) {
  const Grammar g = inline_small_rules(parse_gbnf("root ::= w \"a\" w \"b\" w\nw ::= \" \"?"));
  int copies = 0;
  for (int32_t r = 0; r < g.num_rules(); ++r) copies += g.rule_name(r).rfind("w-", 0) == 0;
  EXPECT_EQ(copies, 3);
}

TEST(RuleInlining, GrowthIsBounded) {
  // Each level doubles the text a full expansion would need; the copies stop at the budget.
  std::string gbnf = "root ::= r0 r0\n";
  for (int i = 0; i < 30; ++i) gbnf += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " r" + std::to_string(i + 1) + "\n";
  gbnf += "r30 ::= \"x\"\n";
  const Grammar original = parse_gbnf(gbnf);
  const Grammar g = inline_small_rules(original);
  EXPECT_LE(g.num_elements(), size_t(1 << 16) + 4 * original.num_elements() + 256);
}

}  // namespace
}  // namespace flashserve::grammar
