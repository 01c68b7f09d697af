// Prefix-cache block hashes: each full block of block_size tokens is identified by a hash of its
// parent block's hash, its token ids and optional extra keys (vLLM kv_cache_utils.hash_block_tokens),
// so equal hashes mean equal whole prefixes, not just equal blocks.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace fp4serve::engine {

using BlockHash = std::uint64_t;

// Parent of the first block (vLLM's NONE_HASH). Fixed rather than random so hashes are stable across
// restarts and runs (tests, future persistent caches); tenants isolate with cache_salt instead.
inline constexpr BlockHash kRootBlockHash = 0x243F6A8885A308D3ull;  // pi's fraction bits

// xxHash64 over: parent hash (8 bytes LE), the block's token ids (int32 LE), the number of extra
// keys and the extra keys (8 bytes each). extra_keys carries cache_salt (first block) and the content
// hashes of the images whose tokens the block holds (multimodal_prompt.h); later LoRA ids.
BlockHash hash_block_tokens(BlockHash parent, std::span<const std::int32_t> tokens,
                            std::span<const std::uint64_t> extra_keys = {});

// The extra key of a request's `cache_salt` (EngineRequest::cache_salt_hash): XXH64 of its UTF-8
// bytes with seed 0, low bit set so that no salt maps to 0 ("no salt"). Documented
// (docs/vllm-surface.md, "KV events") so a router can recompute block hashes.
std::uint64_t cache_salt_key(std::string_view salt);

}  // namespace fp4serve::engine
