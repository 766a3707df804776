// GBNF, the grammar notation llama.cpp made common, parsed into a Grammar:
//
//   root   ::= object                  # a rule; `#` starts a comment
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//   pair   ::= [a-z]+ ":" ws value     # literals, classes [a-z] [^"\\], `.` (any character)
//   ws     ::= [ \t\n]{0,20}           # postfix * + ? {m} {m,} {m,n}; ( ... ) groups
//
// A rule ends at the end of its line; an alternative may go on after `::=` or `|` at a line's end,
// on lines that begin with `|`, and anywhere inside parentheses. Escapes: \n \r \t \\ \" \[ \]
// \- \^ \xHH \uHHHH \UHHHHHHHH. Errors are GrammarError naming line and column.
#pragma once
#include <string_view>
#include "grammar/grammar.h"

namespace flashserve::grammar {

Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

}  // namespace flashserve::grammar
