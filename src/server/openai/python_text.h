// Python's str.strip() / str.lower() / str.isspace() for ASCII text, as the tool-call value
// converters need them (vLLM runs them on the model's parameter strings).
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <string_view>

namespace fp4serve::server::openai {

inline bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

inline std::string_view py_strip(std::string_view s) {
  while (!s.empty() && is_py_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_py_space(s.back())) s.remove_suffix(1);
  return s;
}

inline std::string py_lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace fp4serve::server::openai
