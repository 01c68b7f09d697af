#include "engine/prompt_twins.h"

#include <xxhash.h>

namespace fp4serve::engine {

std::uint64_t PromptTwinIndex::key(std::span<const std::int32_t> prompt, std::uint64_t cache_salt_hash) {
  return XXH64(prompt.data(), prompt.size_bytes(), cache_salt_hash);
}

void PromptTwinIndex::add(std::uint64_t key, std::string request_id) { entries_.emplace(key, std::move(request_id)); }

void PromptTwinIndex::remove(std::uint64_t key, std::string_view request_id) {
  auto [first, last] = entries_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second == request_id) {
      entries_.erase(it);
      return;
    }
  }
}

const std::string* PromptTwinIndex::find(std::uint64_t key, const std::function<bool(const std::string&)>& usable) {
  auto [it, last] = entries_.equal_range(key);
  while (it != last) {
    if (usable(it->second)) return &it->second;
    it = entries_.erase(it);
  }
  return nullptr;
}

}  // namespace fp4serve::engine
