#include "tokenizer/added_vocabulary.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace fp4serve::tokenizer {
namespace {

// Rust regex's Unicode \s (the White_Space property), used by lstrip/rstrip.
bool is_white_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Rust regex's Unicode \w: Alphabetic, M, Nd, Pc, Join_Control. Only single_word tokens need it,
// so a PCRE2 class (binary properties since PCRE2 10.40) is fast enough.
bool is_word_char(char32_t c) {
  static pcre2_code* code = [] {
    int err;
    PCRE2_SIZE off;
    const char* pat = "^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err,
                         &off, nullptr);
  }();
  if (!code) return c < 0x80 && (std::isalnum(int(c)) || c == '_');
  std::string s;
  utf8::append(s, c);
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

char32_t last_char(std::string_view s) {
  std::size_t pos = s.size();
  while (pos > 0 && (static_cast<unsigned char>(s[pos - 1]) & 0xC0) == 0x80) --pos;
  if (pos > 0) --pos;
  return utf8::decode(s, pos);
}

char32_t first_char(std::string_view s) {
  std::size_t pos = 0;
  return utf8::decode(s, pos);
}

// Start of the run of white space that ends text (text.size() if none).
std::size_t trailing_space_start(std::string_view text) {
  std::size_t end = text.size();
  while (end > 0) {
    std::size_t pos = end - 1;
    while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
    std::size_t p = pos;
    if (!is_white_space(utf8::decode(text, p))) break;
    end = pos;
  }
  return end;
}

// Length of the run of white space that starts text.
std::size_t leading_space_length(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t p = pos;
    if (!is_white_space(utf8::decode(text, p))) break;
    pos = p;
  }
  return pos;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<std::pair<std::string, std::int32_t>>& patterns) {
  patterns_.clear();
  for (const auto& [bytes, index] : patterns) patterns_.push_back(Pattern{bytes, index});
  std::stable_sort(patterns_.begin(), patterns_.end(), [](const Pattern& a, const Pattern& b) {
    const auto fa = static_cast<unsigned char>(a.bytes[0]), fb = static_cast<unsigned char>(b.bytes[0]);
    return fa != fb ? fa < fb : a.bytes.size() > b.bytes.size();
  });
  std::size_t p = 0;
  for (int b = 0; b <= 256; ++b) {
    while (p < patterns_.size() && b < 256 && static_cast<unsigned char>(patterns_[p].bytes[0]) < b) ++p;
    first_byte_begin_[b] = std::uint32_t(b == 256 ? patterns_.size() : p);
  }
}

void AddedTokenMatcher::split(std::string_view text, const std::vector<const AddedToken*>& tokens,
                              std::vector<AddedSplit>& out) const {
  const std::size_t n = text.size();
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < n && !patterns_.empty()) {
    // Leftmost-longest: the first position where anything matches, the longest match there.
    const auto b = static_cast<unsigned char>(text[pos]);
    const Pattern* found = nullptr;
    for (std::uint32_t i = first_byte_begin_[b]; i < first_byte_begin_[b + 1]; ++i) {
      const Pattern& pat = patterns_[i];
      if (pat.bytes.size() <= n - pos && std::memcmp(text.data() + pos, pat.bytes.data(), pat.bytes.size()) == 0) {
        found = &pat;
        break;  // sorted longest first
      }
    }
    if (!found) {
      ++pos;
      continue;
    }
    std::size_t start = pos, stop = pos + found->bytes.size();
    pos = stop;  // the next search resumes after this match, even if the match is discarded
    const AddedToken& tok = *tokens[found->index];
    if (tok.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      const bool stop_space = stop == n || !is_word_char(first_char(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_length(text.substr(stop));
    if (start_offset < start) out.push_back({std::uint32_t(start_offset), std::uint32_t(start), -1});
    out.push_back({std::uint32_t(start), std::uint32_t(stop), tok.id});
    start_offset = stop;
  }
  if (start_offset < n || n == 0) out.push_back({std::uint32_t(start_offset), std::uint32_t(n), -1});
}

void AddedVocabulary::finish(const std::vector<std::pair<std::string, std::int32_t>>& raw,
                             const std::vector<std::pair<std::string, std::int32_t>>& norm) {
  by_index_.clear();
  std::int32_t max_id = -1;
  for (const AddedToken& t : tokens_) {
    by_index_.push_back(&t);
    max_id = std::max(max_id, t.id);
  }
  id_index_.assign(std::size_t(max_id + 1), -1);
  for (std::size_t i = 0; i < tokens_.size(); ++i) id_index_[tokens_[i].id] = std::int32_t(i);
  raw_.build(raw);
  normalized_.build(norm);
}

const AddedToken* AddedVocabulary::find_by_id(std::int32_t id) const {
  if (id < 0 || std::size_t(id) >= id_index_.size() || id_index_[id] < 0) return nullptr;
  return &tokens_[id_index_[id]];
}

const AddedToken* AddedVocabulary::find_by_content(std::string_view content) const {
  for (const AddedToken& t : tokens_)
    if (t.content == content) return &t;
  return nullptr;
}

}  // namespace fp4serve::tokenizer
