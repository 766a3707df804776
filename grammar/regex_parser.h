// The JSON Schema `pattern` dialect -- ECMA-262 regular expressions without lookaround or
// backreferences -- parsed into a RegexNode tree (regex_ast.h). What the grammar cannot express,
// or the dialect does not define, is a GrammarError naming the construct and its position (in
// characters, from 0): lookaround, backreferences, \b \B, inline modifiers, \p{...}, and ^ or $
// anywhere but at the ends of the pattern or of its top-level alternatives.
#pragma once
#include <string_view>

#include "grammar/regex_ast.h"

namespace flashserve::grammar {

RegexPtr parse_regex(std::string_view pattern);

}  // namespace flashserve::grammar
