#pragma once
// Added tokens (special and not): found in the text before anything else, exactly as HF
// tokenizers' AddedVocabulary does: leftmost-longest, non-overlapping matches, then the
// single_word / lstrip / rstrip rules. Tokens with normalized=false are matched in the raw text,
// those with normalized=true in the normalized text.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::tokenizer {

struct AddedToken {
  std::int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;
};

// One piece of a split: either text still to tokenize (id < 0) or a whole added token.
struct AddedSplit {
  std::uint32_t begin, end;
  std::int32_t id;  // -1: plain text
};

// Leftmost-longest matcher over a fixed set of patterns (byte strings).
class AddedTokenMatcher {
 public:
  void build(const std::vector<std::pair<std::string, std::int32_t>>& patterns);
  bool empty() const { return patterns_.empty(); }
  // HF's find_matches: appends the splits of text; `tokens` gives each id's flags.
  void split(std::string_view text, const std::vector<const AddedToken*>& tokens_by_index,
             std::vector<AddedSplit>& out) const;

 private:
  struct Pattern {
    std::string bytes;
    std::int32_t index;  // position in tokens_by_index
  };
  std::vector<Pattern> patterns_;                          // sorted by first byte, then length desc
  std::array<std::uint32_t, 257> first_byte_begin_{};      // patterns_ range per first byte
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  AddedVocabulary(const AddedVocabulary&) = delete;  // the matchers point into tokens_
  AddedVocabulary& operator=(const AddedVocabulary&) = delete;

  // `normalize` is applied to normalized=true tokens' content to build their pattern.
  template <typename Normalize>
  void build(std::vector<AddedToken> tokens, Normalize&& normalize) {
    tokens_ = std::move(tokens);
    std::vector<std::pair<std::string, std::int32_t>> raw, norm;
    for (std::size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i].content.empty()) continue;
      if (tokens_[i].normalized) norm.emplace_back(normalize(tokens_[i].content), std::int32_t(i));
      else raw.emplace_back(tokens_[i].content, std::int32_t(i));
    }
    finish(raw, norm);
  }

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  const AddedToken* find_by_id(std::int32_t id) const;
  const AddedToken* find_by_content(std::string_view content) const;

  void split_raw(std::string_view text, std::vector<AddedSplit>& out) const { raw_.split(text, by_index_, out); }
  void split_normalized(std::string_view text, std::vector<AddedSplit>& out) const {
    normalized_.split(text, by_index_, out);
  }

 private:
  void finish(const std::vector<std::pair<std::string, std::int32_t>>& raw,
              const std::vector<std::pair<std::string, std::int32_t>>& norm);

  std::vector<AddedToken> tokens_;
  std::vector<const AddedToken*> by_index_;
  std::vector<std::int32_t> id_index_;  // id -> index into tokens_, -1 when not added
  AddedTokenMatcher raw_, normalized_;
};

}  // namespace fp4serve::tokenizer
