// vLLM's sanitize_message, applied to every error message it sends: memory addresses, traceback lines
// and file paths are removed ("/home/u/x.txt" -> "<path>"), then the text is stripped.
// [vllm: entrypoints/utils.py sanitize_message]
//
// Error messages carry client text, so the patterns run on PCRE2 (Unicode \w and \s like Python's re,
// heap-based backtracking with a match limit) rather than std::regex, whose libstdc++ matcher
// recurses once per repeated character and overflowed the stack on long inputs. The message is also
// cut to kMaxErrorMessageChars first: no error echoes unbounded client input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp4serve::server::openai {

inline constexpr std::size_t kMaxErrorMessageChars = 16 * 1024;   // code points, whole message
inline constexpr std::size_t kMaxEchoedInputChars = 200;          // code points, one echoed value
inline constexpr std::string_view kTruncationMarker = "...[truncated]";

std::string sanitize_message(const std::string& message);

// The first `max_chars` code points of UTF-8 text (invalid bytes count one each), plus
// kTruncationMarker when anything was cut. For client values that an error message quotes.
std::string echo_input(std::string_view text, std::size_t max_chars = kMaxEchoedInputChars);

}  // namespace fp4serve::server::openai
