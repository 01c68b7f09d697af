#include "engine/bad_words.h"

#include <algorithm>
#include <string>
#include <string_view>

namespace fp4serve::engine {

namespace {

// Length of the UTF-8 sequence at s[i] if it encodes a character Python's str.isspace() accepts
// (what str.lstrip() removes), else 0.
std::size_t python_space_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
  auto cp_at = [&](std::size_t n) -> char32_t {
    if (i + n > s.size()) return 0;
    char32_t cp = n == 2 ? (c & 0x1f) : (c & 0x0f);
    for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    return cp;
  };
  if (c == 0xc2) {
    const char32_t cp = cp_at(2);
    return cp == 0x85 || cp == 0xa0 ? 2 : 0;
  }
  if (c == 0xe1 || c == 0xe2 || c == 0xe3) {
    const char32_t cp = cp_at(3);
    const bool space = cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
                       cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return space ? 3 : 0;
  }
  return 0;
}

std::string_view python_lstrip(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t n = python_space_at(s, i);
    if (n == 0) break;
    i += n;
  }
  return s.substr(i);
}

std::string py_repr_ints(const std::vector<int64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace

std::optional<SamplingParamsError> tokenize_bad_words(SamplingParams& params,
                                                      const tokenizer::Tokenizer& tokenizer,
                                                      int64_t max_num_bad_words) {
  params.bad_words_token_ids.clear();
  if (params.bad_words.empty()) return std::nullopt;
  auto& out = params.bad_words_token_ids;
  for (const std::string& word : params.bad_words) {
    const std::string_view stripped = python_lstrip(word);
    for (const bool prefix_space : {false, true}) {
      std::string text(prefix_space ? " " : "");
      text.append(stripped);
      std::vector<int32_t> ids = tokenizer.encode(text, /*add_special_tokens=*/false);
      if (ids.empty()) {
        if (!prefix_space) {
          return SamplingParamsError{"bad_words entries must tokenize to at least one token.", "bad_words"};
        }
        continue;  // the unprefixed form is still enforced
      }
      const bool keep = !prefix_space || (ids.front() != out.back().front() && ids.size() == out.back().size());
      if (!keep) continue;
      out.push_back(std::move(ids));
      if (static_cast<int64_t>(out.size()) > max_num_bad_words) {
        return SamplingParamsError{"Too many bad words after tokenization: " + std::to_string(out.size()) +
                                       ". The max number is " + std::to_string(max_num_bad_words) + ".",
                                   "bad_words"};
      }
    }
  }
  const int64_t max_token_id = static_cast<int64_t>(tokenizer.vocab_size()) - 1;
  std::vector<int64_t> invalid;
  for (const auto& seq : out) {
    for (int32_t id : seq) {
      if (id < 0 || id > max_token_id) invalid.push_back(id);
    }
  }
  if (!invalid.empty()) {
    return SamplingParamsError{"The model vocabulary size is " + std::to_string(max_token_id + 1) +
                                   ", but the following tokens were specified as bad: " + py_repr_ints(invalid) +
                                   ". All token id values should be integers satisfying: 0 <= token_id <= " +
                                   std::to_string(max_token_id) + ".",
                               "bad_words"};
  }
  return std::nullopt;
}

}  // namespace fp4serve::engine
