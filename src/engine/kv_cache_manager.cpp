#include "engine/kv_cache_manager.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/engine_error.h"
#include "engine/multimodal_prompt.h"

namespace fp4serve::engine {

namespace {
int cdiv(int a, int b) { return (a + b - 1) / b; }
}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config, const StateSnapshotStore* snapshots)
    : config_(config),
      max_blocks_per_request_(config.block_size > 0 ? cdiv(config.max_model_len, config.block_size) : 0),
      pool_(config.num_blocks, config.enable_prefix_caching),
      snapshots_(snapshots) {
  if (config.block_size <= 0 || config.max_model_len <= 0)
    throw EngineConfigError(fmt::format("KV cache: block_size {} and max_model_len {} must be positive",
                                        config.block_size, config.max_model_len));
  hit_scratch_.reserve(static_cast<std::size_t>(max_blocks_per_request_));
  free_scratch_.reserve(static_cast<std::size_t>(max_blocks_per_request_));
}

void KvCacheManager::update_block_hashes(Request& request) const {
  auto& hashes = request.res.block_hashes;
  const auto tokens = request.all_token_ids();
  const int bs = config_.block_size;
  const int num_full = static_cast<int>(tokens.size()) / bs;
  if (hashes.capacity() < static_cast<std::size_t>(max_blocks_per_request_))
    hashes.reserve(static_cast<std::size_t>(max_blocks_per_request_));
  std::vector<std::uint64_t> mm_keys;  // multimodal prompts only: text blocks never allocate here
  for (int i = static_cast<int>(hashes.size()); i < num_full; ++i) {
    const BlockHash parent = i == 0 ? kRootBlockHash : hashes[static_cast<std::size_t>(i - 1)];
    const std::uint64_t salt = request.cache_salt_hash;
    std::span<const std::uint64_t> extra;
    if (i == 0 && salt != 0) extra = std::span<const std::uint64_t>(&salt, 1);
    if (request.mm) {
      // The content hash of every image with a token in the block, after the salt (vLLM's order).
      mm_keys.clear();
      if (i == 0 && salt != 0) mm_keys.push_back(salt);
      request.mm->append_block_keys(i * bs, (i + 1) * bs, mm_keys);
      extra = mm_keys;
    }
    hashes.push_back(hash_block_tokens(parent, tokens.subspan(static_cast<std::size_t>(i) * bs, bs), extra));
  }
}

BlockHash KvCacheManager::prefix_hash(Request& request, int num_tokens) const {
  const int bs = config_.block_size;
  if (num_tokens <= 0 || num_tokens % bs != 0 || num_tokens > request.num_tokens())
    throw EngineLogicError(fmt::format("request '{}': no block hash for a {}-token prefix",
                                       request.id(), num_tokens));
  update_block_hashes(request);
  return request.res.block_hashes[static_cast<std::size_t>(num_tokens / bs - 1)];
}

PrefixHit KvCacheManager::get_computed_blocks(Request& request) {
  PrefixHit hit;
  hit_scratch_.clear();
  if (!config_.enable_prefix_caching) return hit;
  update_block_hashes(request);
  const auto& hashes = request.res.block_hashes;
  const int max_hit_blocks = (request.num_tokens() - 1) / config_.block_size;
  // Longest run of cached KV blocks, left to right (a chained hash implies the whole prefix).
  for (int i = 0; i < max_hit_blocks; ++i) {
    const std::int32_t b = pool_.lookup(hashes[static_cast<std::size_t>(i)]);
    if (b < 0) break;
    hit_scratch_.push_back(b);
  }
  int n = static_cast<int>(hit_scratch_.size());
  if (snapshots_ != nullptr) {
    // Hybrid intersection (vLLM HybridKVCacheCoordinator, right to left for the state type): the
    // longest KV hit that also has a GDN state snapshot at its end.
    while (n > 0 && (hit.snapshot_id = snapshots_->find(hashes[static_cast<std::size_t>(n - 1)])) < 0)
      --n;
    if (n == 0) hit.snapshot_id = -1;
  }
  hit_scratch_.resize(static_cast<std::size_t>(n));
  hit.blocks = hit_scratch_;
  hit.num_tokens = n * config_.block_size;
  return hit;
}

void KvCacheManager::record_prefix_query(int num_tokens, int hit_tokens) {
  if (!config_.enable_prefix_caching) return;
  ++stats_.requests;
  stats_.queried_tokens += num_tokens;
  stats_.hit_tokens += hit_tokens;
}

bool KvCacheManager::allocate_slots(Request& request, int num_new_tokens, const PrefixHit* hit) {
  auto& blocks = request.res.block_ids;
  const int hit_tokens = hit != nullptr ? hit->num_tokens : 0;
  if (hit_tokens > 0 && (!blocks.empty() || request.num_computed_tokens != 0))
    throw EngineLogicError(fmt::format("request '{}': prefix hit for a request holding blocks", request.id()));
  const int num_computed = request.num_computed_tokens + hit_tokens;
  const int tokens_needing_slots = std::min(num_computed + num_new_tokens, config_.max_model_len);
  const int num_required = cdiv(tokens_needing_slots, config_.block_size);
  const int num_hit_blocks = hit != nullptr ? static_cast<int>(hit->blocks.size()) : 0;
  const int num_new_blocks = std::max(0, num_required - static_cast<int>(blocks.size()) - num_hit_blocks);
  // Hit blocks sitting in the free queue are taken out of it by touch(), so they count against the
  // free blocks just like fresh ones.
  int num_evictable_hits = 0;
  for (int i = 0; i < num_hit_blocks; ++i)
    if (pool_.ref_count(hit->blocks[static_cast<std::size_t>(i)]) == 0) ++num_evictable_hits;
  if (num_new_blocks + num_evictable_hits > pool_.num_free_blocks()) return false;

  if (blocks.capacity() < static_cast<std::size_t>(max_blocks_per_request_))
    blocks.reserve(static_cast<std::size_t>(max_blocks_per_request_));
  if (num_hit_blocks > 0) {
    pool_.touch(hit->blocks);
    blocks.insert(blocks.end(), hit->blocks.begin(), hit->blocks.end());
    request.res.num_registered_blocks = num_hit_blocks;  // they are the cache's own blocks
  }
  if (!pool_.allocate(num_new_blocks, blocks))
    throw EngineLogicError("KV block pool: free count changed during allocation");
  return true;
}

bool KvCacheManager::fork_blocks(const Request& source, Request& child, int num_tokens, int* partial_src,
                                 int* partial_dst) {
  auto& blocks = child.res.block_ids;
  if (!blocks.empty() || child.num_computed_tokens != 0)
    throw EngineLogicError(fmt::format("request '{}': forked while holding blocks", child.id()));
  const auto& src = source.res.block_ids;
  const int num_full = num_tokens / config_.block_size;
  const bool partial = num_tokens % config_.block_size != 0;
  if (static_cast<int>(src.size()) < num_full + (partial ? 1 : 0))
    throw EngineLogicError(fmt::format("request '{}': fork source '{}' holds {} blocks for {} tokens", child.id(),
                                       source.id(), src.size(), num_tokens));
  if (partial && pool_.num_free_blocks() < 1) return false;
  if (blocks.capacity() < static_cast<std::size_t>(max_blocks_per_request_))
    blocks.reserve(static_cast<std::size_t>(max_blocks_per_request_));
  const std::span<const std::int32_t> shared(src.data(), static_cast<std::size_t>(num_full));
  pool_.touch(shared);
  blocks.assign(shared.begin(), shared.end());
  // The shared blocks are the source's: whatever it offered to the prefix cache stays offered.
  child.res.num_registered_blocks = std::min(source.res.num_registered_blocks, num_full);
  *partial_src = *partial_dst = -1;
  if (partial) {
    if (!pool_.allocate(1, blocks)) throw EngineLogicError("KV block pool: free count changed during a fork");
    *partial_src = src[static_cast<std::size_t>(num_full)];
    *partial_dst = blocks.back();
  }
  return true;
}

void KvCacheManager::cache_computed_blocks(Request& request) {
  if (!config_.enable_prefix_caching) return;
  update_block_hashes(request);
  const int num_full = std::min(request.num_computed_tokens / config_.block_size,
                                static_cast<int>(request.res.block_ids.size()));
  // Events: one BlockStored per run of blocks this call registers (vLLM cache_full_blocks sends one
  // per call). A block whose hash another block already holds stays unregistered and unreported, so
  // every BlockStored hash is later matched by exactly one BlockRemoved.
  int run_start = -1;
  for (int i = request.res.num_registered_blocks; i < num_full; ++i) {
    const std::int32_t id = request.res.block_ids[static_cast<std::size_t>(i)];
    const bool had_hash = pool_.has_hash(id);
    const bool newly = pool_.register_block(id, request.res.block_hashes[static_cast<std::size_t>(i)]) && !had_hash;
    if (events_ == nullptr) continue;
    if (newly && run_start < 0) run_start = i;
    if (!newly && run_start >= 0) {
      events_->block_stored(stored_event(request, run_start, i, kAttentionGroup));
      run_start = -1;
    }
  }
  if (events_ != nullptr && run_start >= 0)
    events_->block_stored(stored_event(request, run_start, num_full, kAttentionGroup));
  request.res.num_registered_blocks = std::max(request.res.num_registered_blocks, num_full);
}

void KvCacheManager::set_event_recorder(KvEventRecorder* recorder) {
  events_ = recorder;
  pool_.set_event_recorder(recorder);
}

void KvCacheManager::record_snapshot_stored(Request& request, int boundary_tokens) {
  if (events_ == nullptr) return;
  const int end = boundary_tokens / config_.block_size;
  if (end <= 0 || boundary_tokens % config_.block_size != 0)
    throw EngineLogicError(fmt::format("request '{}': GDN snapshot at {} tokens is not at a block boundary",
                                       request.id(), boundary_tokens));
  events_->block_stored(stored_event(request, end - 1, end, kGdnStateGroup));
}

BlockStoredEvent KvCacheManager::stored_event(Request& request, int first, int end, int group) const {
  update_block_hashes(request);
  const auto& hashes = request.res.block_hashes;
  const int bs = config_.block_size;
  BlockStoredEvent e;
  e.block_size = bs;
  e.group_idx = group;
  e.block_hashes.assign(hashes.begin() + first, hashes.begin() + end);
  if (first > 0) e.parent_block_hash = hashes[static_cast<std::size_t>(first - 1)];
  const auto tokens = request.all_token_ids();
  e.token_ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(first) * bs,
                     tokens.begin() + static_cast<std::ptrdiff_t>(end) * bs);
  // The extra keys update_block_hashes mixed in: the cache_salt key on the first block, then the
  // content hashes of the images with tokens in the block.
  for (int i = first; i < end; ++i) {
    std::vector<std::uint64_t> keys;
    if (i == 0 && request.cache_salt_hash != 0) keys.push_back(request.cache_salt_hash);
    if (request.mm) request.mm->append_block_keys(i * bs, (i + 1) * bs, keys);
    if (keys.empty()) e.extra_keys.emplace_back(std::nullopt);
    else e.extra_keys.emplace_back(std::move(keys));
  }
  return e;
}

void KvCacheManager::truncate(Request& request, int num_tokens) {
  auto& blocks = request.res.block_ids;
  const auto keep = static_cast<std::size_t>(cdiv(std::max(num_tokens, 0), config_.block_size));
  if (keep >= blocks.size()) return;
  if (static_cast<int>(keep) < request.res.num_registered_blocks)
    throw EngineLogicError(fmt::format("request '{}': truncating to {} tokens would drop registered KV blocks",
                                       request.id(), num_tokens));
  free_scratch_.assign(blocks.rbegin(), blocks.rend() - static_cast<std::ptrdiff_t>(keep));
  pool_.give_back(free_scratch_);
  blocks.resize(keep);
}

void KvCacheManager::free(Request& request) {
  auto& blocks = request.res.block_ids;
  free_scratch_.assign(blocks.rbegin(), blocks.rend());
  pool_.free(free_scratch_);
  blocks.clear();
  request.res.num_registered_blocks = 0;
}

}  // namespace fp4serve::engine
