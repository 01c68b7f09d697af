#pragma once
// Byte-level BPE: a word (raw bytes of one pre-token) -> token ids, by applying merges in rank
// order exactly as HF tokenizers' BPE model (models/bpe/word.rs) does. Works on bytes, not on the
// GPT-2 byte-level characters: the vocabulary is translated once at load time.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fp4serve::tokenizer {

class WordCache;

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;  // HF: a word that is itself in the vocab skips the merges
  };
  // vocab: byte-level token string -> id; merges: pairs of byte-level token strings, by rank.
  // `what` names the file in error messages.
  BpeModel(const std::vector<std::pair<std::string, std::int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options,
           const std::string& what);
  ~BpeModel();
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  // Appends the ids of one pre-token (raw bytes, non-empty). Thread-safe.
  void encode_word(std::string_view bytes, std::vector<std::int32_t>& out) const;

  // Byte-level token string of an id, or nullptr for ids the model does not have.
  const std::string* id_to_token(std::int32_t id) const;
  std::int32_t token_to_id(std::string_view token) const;  // -1 if absent
  std::size_t vocab_size() const { return token_to_id_.size(); }
  std::size_t merge_count() const { return merge_count_; }

 private:
  struct MergeSlot {
    std::uint64_t key;  // (left << 32) | right; kEmptyKey when free
    std::int32_t rank;
    std::int32_t merged;
  };
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t(0);

  const MergeSlot* find_merge(std::int32_t left, std::int32_t right) const;
  void insert_merge(std::int32_t left, std::int32_t right, std::int32_t rank, std::int32_t merged);
  void merge_small(std::string_view bytes, std::vector<std::int32_t>& out) const;
  void merge_large(std::string_view bytes, std::vector<std::int32_t>& out) const;

  Options options_;
  std::unordered_map<std::string, std::int32_t> token_to_id_;  // byte-level strings
  std::vector<const std::string*> id_to_token_;
  std::unordered_map<std::string, std::int32_t> bytes_to_id_;  // raw bytes (for ignore_merges)
  std::array<std::int32_t, 256> byte_ids_{};
  std::vector<MergeSlot> merge_table_;  // open addressing, linear probing, power-of-two size
  std::uint64_t merge_mask_ = 0;
  std::size_t merge_count_ = 0;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace fp4serve::tokenizer
