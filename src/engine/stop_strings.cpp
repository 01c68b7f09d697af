#include "engine/stop_strings.h"

#include <algorithm>

namespace fp4serve::engine {
namespace {
std::size_t count_code_points(std::string_view s) {
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}
}  // namespace

std::optional<StopStringMatch> find_stop_string(std::string_view output_text, std::size_t new_bytes,
                                                const std::vector<std::string>& stops,
                                                bool include_stop_str_in_output) {
  if (new_bytes == 0 || stops.empty()) return std::nullopt;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    // vLLM: output_text.find(stop, 1 - new_char_count - len(stop)): only where a match can end
    // inside the new text.
    const std::size_t window = new_bytes + stop.size() - 1;
    const std::size_t from = output_text.size() > window ? output_text.size() - window : 0;
    std::size_t at = output_text.find(stop, from);
    if (at == std::string_view::npos) continue;
    if (include_stop_str_in_output) at += stop.size();
    return StopStringMatch{stop, std::min(at, output_text.size())};
  }
  return std::nullopt;
}

std::size_t stop_holdback_chars(const std::vector<std::string>& stops, bool include_stop_str_in_output) {
  if (stops.empty() || include_stop_str_in_output) return 0;
  std::size_t longest = 1;
  for (const std::string& s : stops) longest = std::max(longest, count_code_points(s));
  return longest - 1;
}

std::size_t without_last_chars(std::string_view text, std::size_t chars) {
  std::size_t end = text.size();
  while (chars > 0 && end > 0) {
    --end;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    --chars;
  }
  return end;
}

}  // namespace fp4serve::engine
