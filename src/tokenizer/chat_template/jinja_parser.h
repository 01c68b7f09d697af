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

}  // namespace fp4serve::jinja
