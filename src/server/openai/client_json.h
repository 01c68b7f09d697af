// JSON a client controls (request bodies, tool-call argument strings), parsed once with its nesting
// bounded before anything recursive touches it.
//
// Why a bound: nlohmann's parser and destructor are iterative, but copying, comparing, dumping and
// Python-repr'ing a value recurse once per level, so a 200 KB body of '[' overflowed an io thread's
// stack. vLLM parses with Python's json.loads, which stops at the interpreter's recursion limit (about
// 1,000 levels) and FastAPI answers 400 "There was an error parsing the body". We refuse deeper than
// kMaxJsonNestingDepth levels with that message plus the reason; no real request comes close (tool
// JSON schemas nest a few dozen levels).
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp4serve::server::openai {

inline constexpr std::size_t kMaxJsonNestingDepth = 512;

// The byte offset of the first '[' or '{' that opens level max_depth + 1, or nullopt. One linear pass
// that skips string literals (escapes included); it trusts nothing else about the text, so malformed
// JSON is scanned too (the parser reports it afterwards).
std::optional<std::size_t> find_excess_nesting(std::string_view text,
                                               std::size_t max_depth = kMaxJsonNestingDepth);

// Thrown by parse_client_json (and turned into a 400 by the request parsers).
class JsonNestingError : public std::runtime_error {
 public:
  JsonNestingError(std::size_t byte_offset, std::size_t max_depth);
  std::size_t byte_offset() const { return byte_offset_; }

 private:
  std::size_t byte_offset_;
};

// Throws JsonNestingError when `text` nests deeper than max_depth.
void check_json_nesting(std::string_view text, std::size_t max_depth = kMaxJsonNestingDepth);

}  // namespace fp4serve::server::openai
