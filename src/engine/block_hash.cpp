#include "engine/block_hash.h"

#include <bit>

#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack: no allocation per block
#include <xxhash.h>

namespace fp4serve::engine {

BlockHash hash_block_tokens(BlockHash parent, std::span<const std::int32_t> tokens,
                            std::span<const std::uint64_t> extra_keys) {
  static_assert(std::endian::native == std::endian::little, "hash input assumes little-endian");
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  XXH64_update(&state, &parent, sizeof(parent));
  XXH64_update(&state, tokens.data(), tokens.size_bytes());
  const std::uint64_t num_extra = extra_keys.size();
  XXH64_update(&state, &num_extra, sizeof(num_extra));
  if (!extra_keys.empty()) XXH64_update(&state, extra_keys.data(), extra_keys.size_bytes());
  return XXH64_digest(&state);
}

std::uint64_t cache_salt_key(std::string_view salt) { return XXH64(salt.data(), salt.size(), 0) | 1; }

}  // namespace fp4serve::engine
