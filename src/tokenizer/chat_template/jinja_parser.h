// Recursive-descent parser following jinja2's grammar (parser.py), including its operator
// precedence: filters bind tighter than arithmetic, `not` looser than `is`, conditional
// expressions loosest.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_ast.h"
#include "tokenizer/chat_template/jinja_lexer.h"

namespace fp4serve::jinja {

// Parses tokens into a statement list. Throws TemplateSyntaxError naming line and column.
// max_nesting bounds the depth of nested expressions and blocks (stack safety).
Body parse_template(const std::vector<Token>& tokens, const SourceMap& map, int max_nesting);

// Throws TemplateSyntaxError for an unknown filter or test outside `if` blocks and conditional
// expressions (inside them jinja2 defers the error to when the filter is reached). Called by
// parse_template.
void check_filter_and_test_names(const Body& body);

}  // namespace fp4serve::jinja
