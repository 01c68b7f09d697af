#pragma once
// One tokenizer.json regex, compiled with PCRE2 (UTF + UCP, JIT), that cuts text into pieces.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4serve::tokenizer {

// Rewrites an Oniguruma pattern (what HF tokenizers runs) into a PCRE2 pattern with the same
// meaning: \s becomes Oniguruma's exact whitespace list, and \p{L}, \p{N}, \p{M} gain the code
// points HF's newer Unicode tables have. Everything else is passed through.
std::string translate_onig_pattern(std::string_view onig);

class RegexSplitter {
 public:
  // `onig_pattern` is the regex as written in tokenizer.json. `what` names it in error messages.
  RegexSplitter(std::string_view onig_pattern, std::string what);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;

  // HF Split(behavior=Isolated, invert=false) on valid UTF-8: every match is a piece and so is
  // every non-empty gap between matches. Appends [begin, end) byte offsets relative to text.
  void split(std::string_view text, std::vector<std::pair<std::uint32_t, std::uint32_t>>& pieces) const;

  const std::string& pcre_pattern() const { return pcre_pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pcre_pattern_;
  std::string what_;
};

}  // namespace fp4serve::tokenizer
