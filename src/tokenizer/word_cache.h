#pragma once
// Thread-safe memo of word -> ids for BPE. Sharded so concurrent encoders rarely contend; bounded:
// once a shard is full it stops inserting (as HF's BPE cache does), so memory stays fixed.
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fp4serve::tokenizer {

class WordCache {
 public:
  static constexpr std::size_t kMaxWordBytes = 64;
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kEntriesPerShard = 8192;

  // Appends the cached ids of word to out and returns true, or returns false.
  bool lookup(std::string_view word, std::size_t hash, std::vector<std::int32_t>& out) const;
  void insert(std::string_view word, std::size_t hash, const std::int32_t* ids, std::size_t n);

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    mutable std::mutex mutex;
    std::unordered_map<std::string, std::vector<std::int32_t>, Hash, std::equal_to<>> map;
  };
  Shard shards_[kShards];
};

}  // namespace fp4serve::tokenizer
