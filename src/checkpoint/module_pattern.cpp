#include "checkpoint/module_pattern.h"

namespace fp4serve {

namespace {

// Matches one `[...]` class at pattern[pi] against c. Returns the index just past the class, or
// npos when the bracket is unterminated (then fnmatch treats '[' as a literal).
size_t match_class(std::string_view pattern, size_t pi, char c, bool& matched) {
  size_t i = pi + 1;
  bool negate = false;
  if (i < pattern.size() && pattern[i] == '!') {
    negate = true;
    ++i;
  }
  bool hit = false;
  bool first = true;
  while (i < pattern.size() && (first || pattern[i] != ']')) {
    first = false;
    char lo = pattern[i];
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      char hi = pattern[i + 2];
      if (lo <= c && c <= hi) hit = true;
      i += 3;
    } else {
      if (lo == c) hit = true;
      ++i;
    }
  }
  if (i >= pattern.size()) return std::string_view::npos;
  matched = hit != negate;
  return i + 1;
}

}  // namespace

bool fnmatch_case(std::string_view text, std::string_view pattern) {
  size_t ti = 0, pi = 0;
  size_t star_pi = std::string_view::npos, star_ti = 0;
  while (ti < text.size()) {
    if (pi < pattern.size()) {
      char p = pattern[pi];
      if (p == '*') {
        star_pi = pi++;
        star_ti = ti;
        continue;
      }
      if (p == '?') {
        ++pi;
        ++ti;
        continue;
      }
      if (p == '[') {
        bool matched = false;
        size_t next = match_class(pattern, pi, text[ti], matched);
        if (next == std::string_view::npos) {
          if (text[ti] == '[') {
            ++pi;
            ++ti;
            continue;
          }
        } else if (matched) {
          pi = next;
          ++ti;
          continue;
        }
      } else if (p == text[ti]) {
        ++pi;
        ++ti;
        continue;
      }
    }
    if (star_pi == std::string_view::npos) return false;
    pi = star_pi + 1;
    ti = ++star_ti;
  }
  while (pi < pattern.size() && pattern[pi] == '*') ++pi;
  return pi == pattern.size();
}

bool contains_components(std::string_view path, std::string_view name) {
  if (name.empty()) return false;
  size_t pos = path.find(name);
  while (pos != std::string_view::npos) {
    bool starts = pos == 0 || path[pos - 1] == '.';
    size_t end = pos + name.size();
    bool ends = end == path.size() || path[end] == '.';
    if (starts && ends) return true;
    pos = path.find(name, pos + 1);
  }
  return false;
}

bool is_within(std::string_view path, std::string_view ancestor) {
  if (path.size() < ancestor.size() || path.substr(0, ancestor.size()) != ancestor) return false;
  return path.size() == ancestor.size() || path[ancestor.size()] == '.';
}

std::vector<std::string> module_path_spellings(std::string_view path) {
  constexpr std::string_view kHf = "model.language_model.";
  constexpr std::string_view kVllm = "language_model.model.";
  std::vector<std::string> out{std::string(path)};
  if (path.substr(0, kHf.size()) == kHf) out.push_back(std::string(kVllm) + std::string(path.substr(kHf.size())));
  else if (path.substr(0, kVllm.size()) == kVllm)
    out.push_back(std::string(kHf) + std::string(path.substr(kVllm.size())));
  return out;
}

}  // namespace fp4serve
