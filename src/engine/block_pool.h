// The pool of paged KV-cache blocks (vLLM v1/core/block_pool.py): ref-counted blocks, an LRU free
// queue that also holds cached-but-unused blocks, and the hash -> block map of the prefix cache.
//
// Free-queue semantics (vLLM FreeKVCacheBlockQueue): a block whose ref count drops to 0 is appended
// at the tail, keeping its hash (it stays a prefix-cache hit candidate); allocation pops from the
// head and drops the popped block's hash (eviction of the least recently freed); a cache hit on a
// free block removes it from the queue. Callers free a request's blocks in reverse order so a
// sequence's tail is evicted before its (more shareable) head.
//
// All storage is sized at construction; nothing on the allocate/free/touch path allocates.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_hash_table.h"
#include "engine/kv_events.h"

namespace fp4serve::engine {

// KV-cache capacity for a byte budget. bytes_per_block = block_size x kv_bytes_per_token, where
// kv_bytes_per_token covers K and V of every attention layer (and any per-token scales).
struct KvCapacity {
  std::uint64_t bytes_per_block = 0;
  std::int64_t num_blocks = 0;
  std::int64_t num_tokens = 0;       // num_blocks x block_size
  // vLLM's "Maximum concurrency for N tokens per request": num_blocks / blocks of one max-length
  // request (cdiv(max_model_len, block_size)).
  double max_concurrency = 0.0;
  int max_model_len = 0;

  // Start-up log lines in vLLM's wording: "KV cache size: 1,234,560 tokens" and
  // "Maximum concurrency for 262,144 tokens per request: 4.71x".
  std::string size_line() const;
  std::string concurrency_line() const;
};
KvCapacity compute_kv_capacity(std::uint64_t budget_bytes, std::uint64_t kv_bytes_per_token,
                               int block_size, int max_model_len);

class BlockPool {
 public:
  BlockPool(int num_blocks, bool enable_prefix_caching);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return num_free_; }
  // Fraction of blocks in use by requests (vLLM get_usage): 1 - free/total. Cached-but-free blocks
  // count as free.
  double usage() const;

  // Appends n fresh blocks (ref count 1) to out; false, with nothing taken, if fewer are free.
  bool allocate(int n, std::vector<std::int32_t>& out);
  // Cache hits: ref count +1; a block that was free leaves the free queue.
  void touch(std::span<const std::int32_t> block_ids);
  // ref count -1 for each, in the given order; blocks reaching 0 join the free queue's tail.
  void free(std::span<const std::int32_t> block_ids_in_eviction_order);
  // Blocks a request took and never filled with a kept token (rejected speculative positions): each
  // must have ref count 1 and no hash. They go to the HEAD of the free queue, newest-allocated first
  // given last-first, so the queue is back in the order allocate() found it and the next allocation
  // reuses them instead of evicting a cached block.
  void give_back(std::span<const std::int32_t> block_ids_last_first);

  // Prefix cache: the block holding `hash`, or -1.
  std::int32_t lookup(BlockHash hash) const;
  // Registers a computed full block under hash. If another block already holds the hash (two
  // requests computed the same prefix at once) this block stays unregistered; returns false then.
  bool register_block(std::int32_t block_id, BlockHash hash);

  int ref_count(std::int32_t block_id) const { return blocks_.at(block_id).ref_count; }
  bool has_hash(std::int32_t block_id) const { return blocks_.at(block_id).has_hash; }
  int num_registered() const { return table_.size(); }
  std::int64_t num_evictions() const { return num_evictions_; }
  bool prefix_caching() const { return enable_prefix_caching_; }
  // KV events (kv_events.h): an evicted hash is reported as BlockRemoved of the attention group.
  void set_event_recorder(KvEventRecorder* recorder) { events_ = recorder; }
  // Free queue from head (next to allocate) to tail. For tests and debugging; allocates.
  std::vector<std::int32_t> free_queue_order() const;

 private:
  struct Block {
    int ref_count = 0;
    std::int32_t prev = -1, next = -1;  // free-queue links
    bool in_free_queue = false;
    bool has_hash = false;
    BlockHash hash = 0;
  };
  void queue_remove(std::int32_t id);
  void queue_append(std::int32_t id);
  void queue_prepend(std::int32_t id);
  void drop_hash(std::int32_t id);

  std::vector<Block> blocks_;
  std::int32_t head_ = -1, tail_ = -1;
  int num_free_ = 0;
  bool enable_prefix_caching_;
  BlockHashTable table_;
  std::int64_t num_evictions_ = 0;
  KvEventRecorder* events_ = nullptr;
};

}  // namespace fp4serve::engine
