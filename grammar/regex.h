// Regular expressions (the JSON Schema `pattern` dialect: ECMA-262 without lookaround or
// backreferences) compiled to GBNF rules, so a regex constrains decoding like any grammar.
#pragma once
#include <string>
#include <string_view>

namespace flashserve::grammar {

// GBNF rules whose rule `name` matches exactly the strings the pattern matches in full (as if
// anchored at both ends; a leading ^ and trailing $ are accepted and change nothing). Helper rules
// are named `name-...`. Throws GrammarError naming what is unsupported or malformed.
std::string regex_to_gbnf(std::string_view pattern, std::string_view name = "root");

}  // namespace flashserve::grammar
