// Per-request KV-cache bookkeeping over the BlockPool (vLLM v1/core/kv_cache_manager.py):
// prefix-cache lookup, slot allocation for newly scheduled tokens, registering computed full blocks,
// and freeing. For the hybrid model the lookup is intersected with the GDN snapshot store: a hit is
// only reported where the recurrent state can be restored too.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_pool.h"
#include "engine/request.h"
#include "engine/state_snapshot_store.h"

namespace fp4serve::engine {

struct KvCacheConfig {
  int block_size = 16;
  int num_blocks = 0;
  int max_model_len = 0;
  bool enable_prefix_caching = true;
};

// Result of a prefix-cache lookup. `blocks` points into the manager's scratch buffer and is valid
// until the next lookup.
struct PrefixHit {
  std::span<const std::int32_t> blocks;
  int num_tokens = 0;      // blocks.size() x block_size
  int snapshot_id = -1;    // GDN state snapshot to restore (-1: none needed or no state layers)
};

// vLLM PrefixCacheStats, in tokens: what `vllm:prefix_cache_queries/hits` count.
struct PrefixCacheStats {
  std::int64_t requests = 0;
  std::int64_t queried_tokens = 0;
  std::int64_t hit_tokens = 0;
};

class KvCacheManager {
 public:
  // snapshots may be null (a model without GDN layers: any cached KV prefix is a hit).
  KvCacheManager(const KvCacheConfig& config, const StateSnapshotStore* snapshots);

  // Longest usable prefix hit for a request that holds no blocks (new or preempted). Capped at
  // num_tokens - 1 so the last token is always recomputed to produce logits (vLLM
  // max_cache_hit_length); full blocks only; with a snapshot store, shortened to the longest prefix
  // whose GDN snapshot exists. Does not change any ref count and records no stats.
  PrefixHit get_computed_blocks(Request& request);
  // Counts one admitted lookup (vLLM counts per lookup; we count once per admission so a request
  // stuck at the head of the queue for many steps does not inflate the hit rate).
  void record_prefix_query(int num_tokens, int hit_tokens);

  // Makes room for num_new_tokens beyond request.num_computed_tokens (+ hit->num_tokens when a hit
  // is given; only for a request with no blocks). Takes the hit's blocks (ref +1) first so the new
  // allocation cannot evict them. Returns false, changing nothing, when the free blocks do not
  // suffice. On success, the new blocks are the tail of request.res.block_ids.
  bool allocate_slots(Request& request, int num_new_tokens, const PrefixHit* hit = nullptr);

  // Shared prefill (n > 1): `child`, holding no blocks, takes the KV of the first num_tokens
  // positions of `source`: its full blocks by reference (ref +1, as a prefix hit takes them) and,
  // when num_tokens ends inside a block, a fresh block the caller fills with a copy of the source's
  // partial block (copy-on-write: the child's next tokens land in its own block). Sets *partial_src /
  // *partial_dst to that pair (-1 when none). False, changing nothing, when no block is free.
  bool fork_blocks(const Request& source, Request& child, int num_tokens, int* partial_src, int* partial_dst);

  // Registers the request's full blocks whose KV has been computed (num_computed_tokens) in the
  // prefix cache. Called after each step, so a hit never points at KV that is not written yet.
  void cache_computed_blocks(Request& request);

  // Releases all of the request's blocks, last block first, so its tail is evicted first.
  void free(Request& request);
  // Speculative decoding: shrinks the request's KV to its first num_tokens positions (the kept ones
  // after a verify step). Blocks past them held only rejected positions and are never registered; they
  // go back to the head of the free queue (BlockPool::give_back). Rows of rejected positions in the
  // kept last block are simply overwritten by the next step. EngineLogicError if num_tokens would cut
  // into a registered block.
  void truncate(Request& request, int num_tokens);

  // KV events (kv_events.h): cache_computed_blocks reports what it registers as BlockStored of the
  // attention group, the pool reports evictions. Null (the default): no events.
  void set_event_recorder(KvEventRecorder* recorder);
  // A GDN snapshot of the state after the first boundary_tokens tokens was committed: BlockStored
  // of the GDN state group for the block ending there (no-op without a recorder).
  void record_snapshot_stored(Request& request, int boundary_tokens);

  // Block hashes for every full block of request.all_token_ids() (computed lazily, chained).
  void update_block_hashes(Request& request) const;
  // Hash of the prefix of the first num_tokens tokens (a multiple of block_size, > 0).
  BlockHash prefix_hash(Request& request, int num_tokens) const;

  double usage() const { return pool_.usage(); }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  BlockPool& pool() { return pool_; }
  const BlockPool& pool() const { return pool_; }
  int block_size() const { return config_.block_size; }
  int max_blocks_per_request() const { return max_blocks_per_request_; }
  const KvCacheConfig& config() const { return config_; }

 private:
  KvCacheConfig config_;
  int max_blocks_per_request_;
  BlockPool pool_;
  const StateSnapshotStore* snapshots_;
  std::vector<std::int32_t> hit_scratch_;
  std::vector<std::int32_t> free_scratch_;
  PrefixCacheStats stats_;
  KvEventRecorder* events_ = nullptr;
  // The BlockStored of blocks [first, end) of the request, for `group`.
  BlockStoredEvent stored_event(Request& request, int first, int end, int group) const;
};

}  // namespace fp4serve::engine
