// Python's text forms of values, as vLLM's error messages print them. vLLM builds its 400 messages
// with f-strings and str()/repr() of Python objects (pydantic error dicts, exception reprs, lists),
// so ours must spell them the same way to be word-for-word equal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::server::openai {

// repr(str): single quotes unless the text has a ' and no ", escapes as CPython does for the
// ASCII control range; printable non-ASCII text is kept as is (CPython's str.isprintable()).
std::string py_str_repr(std::string_view text);

// str(value) of a JSON value after Python's json.loads: True/False/None, ints, float repr
// ("1.0", "1e-05"), strings unchanged, lists/dicts in Python's repr form.
std::string py_str(const nlohmann::ordered_json& value);

// repr(value) of a JSON value after json.loads (strings quoted, containers recursively).
std::string py_repr(const nlohmann::ordered_json& value);

// repr(list[int]): "[1, 2, 3]".
std::string py_int_list(const std::vector<int64_t>& ids);

// Number of code points of UTF-8 text (Python's len(str)); invalid bytes count one each.
std::size_t py_len(std::string_view utf8);

// Python's json.JSONDecodeError for text that does not parse: msg ("Expecting value", "Extra
// data", ...), pos (in characters), lineno and colno (1-based). Derived from nlohmann's parse
// error; exact for the common faults (truncated body, stray comma, single quotes, missing
// colon, unterminated string, trailing data), approximate for invalid literals.
struct PythonJsonError {
  std::string msg;
  std::size_t pos = 0;
  std::size_t lineno = 1;
  std::size_t colno = 1;
  // str(e): "Expecting value: line 1 column 12 (char 11)"
  std::string str() const;
};
// nullopt when the text parses.
std::optional<PythonJsonError> python_json_decode_error(std::string_view text);
// The same from the error nlohmann threw parsing `text` (no second parse): a parse_error, or the
// out_of_range it throws for a number past double's range, which Python reads as inf.
PythonJsonError python_json_decode_error(std::string_view text, const nlohmann::ordered_json::exception& error);

}  // namespace fp4serve::server::openai
