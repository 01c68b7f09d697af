#include "server/openai/client_json.h"

namespace fp4serve::server::openai {

std::optional<std::size_t> find_excess_nesting(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped byte cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > max_depth) return i;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return std::nullopt;
}

JsonNestingError::JsonNestingError(std::size_t byte_offset, std::size_t max_depth)
    : std::runtime_error("JSON nested deeper than " + std::to_string(max_depth) +
                         " levels (at byte " + std::to_string(byte_offset) + ")"),
      byte_offset_(byte_offset) {}

void check_json_nesting(std::string_view text, std::size_t max_depth) {
  if (auto at = find_excess_nesting(text, max_depth)) throw JsonNestingError(*at, max_depth);
}

}  // namespace fp4serve::server::openai
