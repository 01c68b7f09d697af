// Splits a template into tokens, applying jinja2's whitespace rules as transformers configures them:
// trim_blocks=True (drop the first newline after a block or comment tag), lstrip_blocks=True (drop
// spaces/tabs before a block or comment tag that starts a line), `-` / `+` whitespace control,
// keep_trailing_newline=False, and \r\n / \r normalised to \n.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer/chat_template/jinja_error.h"

namespace fp4serve::jinja {

enum class TokenType { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Operator, Eof };

struct Token {
  TokenType type;
  std::string text;    // Data: the text; String: decoded value; Name/Operator/number: the spelling
  std::size_t offset;  // byte offset in the normalised source
};

// Maps byte offsets of the normalised source to line/column.
class SourceMap {
 public:
  explicit SourceMap(const std::string& source);
  SourcePos pos(std::size_t offset) const;

 private:
  const std::string* source_;
  std::vector<std::size_t> line_starts_;
};

// Applies jinja2's source normalisation (newlines, trailing newline) before lexing.
std::string normalize_template_source(const std::string& source);

// Tokenizes normalised source. Throws TemplateSyntaxError.
std::vector<Token> tokenize_template(const std::string& source, const SourceMap& map);

}  // namespace fp4serve::jinja
