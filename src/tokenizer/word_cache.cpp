#include "tokenizer/word_cache.h"

namespace fp4serve::tokenizer {

bool WordCache::lookup(std::string_view word, std::size_t hash, std::vector<std::int32_t>& out) const {
  const Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.map.find(word);
  if (it == shard.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::insert(std::string_view word, std::size_t hash, const std::int32_t* ids, std::size_t n) {
  Shard& shard = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.map.size() >= kEntriesPerShard) return;
  shard.map.emplace(std::string(word), std::vector<std::int32_t>(ids, ids + n));
}

}  // namespace fp4serve::tokenizer
