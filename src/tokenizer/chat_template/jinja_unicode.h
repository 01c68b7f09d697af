// Unicode helpers with Python 3 str semantics (templates index, slice, strip and split strings by
// code point, and Python's notion of whitespace is wider than ASCII).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp4serve::jinja {

// Decodes UTF-8 into code points. Invalid bytes decode to U+FFFD, one per byte (templates only ever
// see strings that came from JSON, so this never happens in practice).
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
std::size_t utf8_length(std::string_view s);  // number of code points

// str.isspace(): the characters Python's str.strip()/split() remove and jinja2's lexer treats as \s.
bool py_isspace(char32_t cp);
// An approximation of str.isprintable() used by repr(); exact for ASCII, Latin-1 and the common
// format/separator characters.
bool py_isprintable(char32_t cp);

// str.strip / lstrip / rstrip. chars == nullptr means "whitespace".
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace fp4serve::jinja
