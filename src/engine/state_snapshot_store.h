// Prefix-cache snapshots of the GDN state. The recurrent state cannot be truncated like a KV cache,
// so a prefix-cache hit at token t needs a copy of the state as it was after token t. Snapshots are
// keyed by the block hash of the prefix they end (hash of block t/block_size - 1), so a KV lookup
// and a snapshot lookup speak the same key, and live in their own byte budget with LRU eviction.
//
// Life of a snapshot id:  free --reserve--> pending (the model writes it during a step; not findable,
// never evicted) --commit--> committed (findable; LRU-evictable unless pinned) --evict/release--> free.
// A request restoring from a snapshot pins it until the step that copies it into a slot is done.
// Only ids are handed out here; the model owns the memory behind them.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_hash_table.h"
#include "engine/kv_events.h"

namespace fp4serve::engine {

class StateSnapshotStore {
 public:
  // capacity may be 0 (snapshots disabled: every reserve() fails, every find() misses).
  explicit StateSnapshotStore(int capacity);
  static int capacity_for_budget(std::uint64_t budget_bytes, std::uint64_t snapshot_bytes);

  // Committed snapshot for key, or -1.
  int find(BlockHash key) const;
  // A writable id: a free one, else the least recently used committed, unpinned snapshot is evicted.
  // -1 when every id is pending or pinned.
  int reserve();
  // Makes a pending id findable under key with LRU position "newest". If key is already committed
  // (another sequence snapshotted the same prefix) the id is released instead; returns false then.
  bool commit(int id, BlockHash key, int num_tokens);
  // Returns a pending id to the free list (its content was never completed or is not wanted).
  void release(int id);
  // Pin/unpin a committed snapshot (being restored this step). Pinning also marks it most recent.
  void pin(int id);
  void unpin(int id);
  void touch(int id);  // mark most recently used

  int num_tokens(int id) const { return entries_.at(static_cast<std::size_t>(id)).num_tokens; }
  int capacity() const { return static_cast<int>(entries_.size()); }
  int num_free() const { return static_cast<int>(free_ids_.size()); }
  int num_pending() const { return num_pending_; }
  int num_committed() const { return table_.size(); }
  int num_pinned() const { return num_pinned_; }
  std::int64_t num_evictions() const { return num_evictions_; }
  // KV events (kv_events.h): an evicted snapshot is reported as BlockRemoved of the GDN state group
  // (its commit is reported by the scheduler, which knows the tokens: KvCacheManager::record_snapshot_stored).
  void set_event_recorder(KvEventRecorder* recorder) { events_ = recorder; }

 private:
  enum class State : std::uint8_t { kFree, kPending, kCommitted };
  struct Entry {
    State state = State::kFree;
    int pins = 0;
    int num_tokens = 0;
    BlockHash key = 0;
    int prev = -1, next = -1;  // LRU list of committed entries, head = oldest
  };
  void lru_remove(int id);
  void lru_append(int id);
  Entry& entry(int id);

  std::vector<Entry> entries_;
  std::vector<int> free_ids_;
  int lru_head_ = -1, lru_tail_ = -1;
  int num_pending_ = 0;
  int num_pinned_ = 0;
  BlockHashTable table_;
  std::int64_t num_evictions_ = 0;
  KvEventRecorder* events_ = nullptr;
};

}  // namespace fp4serve::engine
