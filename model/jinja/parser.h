// Turns tokens into the statement tree, with jinja2's grammar and operator precedence (lowest
// first): `x if c else y`, or, and, not, comparisons/in/not in (chained), + -, ~, * / // %, **,
// unary - +, then postfix .attr [index] (call), and filters | / tests `is` bind to the operand.
#pragma once
#include <vector>

#include "model/jinja/ast.h"
#include "model/jinja/lexer.h"

namespace flashserve::jinja {

// Brackets, blocks and expressions nest at most this deep (a bracket costs 3 levels) (a template is untrusted input: the
// parser and the renderer recurse once per level).
constexpr int kMaxSyntaxDepth = 200;

// Throws TemplateError (Syntax) positioned at the offending token: unknown or unclosed tags, a
// misplaced break/continue, and the constructs this engine leaves out (include, extends, import,
// recursive loops).
Body parse(const std::vector<Token>& tokens);

}  // namespace flashserve::jinja
