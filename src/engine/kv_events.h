// vLLM's KV cache events (vllm/distributed/kv_events.py): what the prefix cache tells an external
// KV-aware router, and the publisher settings (vllm/config/kv_events.py KVEventsConfig, serve's
// --kv-events-config). The engine thread records events into a KvEventRecorder as blocks are
// registered and evicted; after each step they become one KvEventBatch that the KvEventPublisher
// sends on its own thread (kv_event_publisher.h). The wire encoding is kv_event_encoding.h.
//
// Two cache groups, as vLLM publishes a hybrid (attention + Mamba-type) model: group 0 is the
// attention KV ("full_attention"), one event per registered block; group 1 is the GDN state
// snapshots ("mamba"), one stored block per snapshot, under the hash of the block the snapshot ends
// at. A prefix of n blocks is a hit only where group 0 holds blocks 1..n and group 1 holds block n
// (docs/vllm-surface.md, "KV events").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace fp4serve::engine {

// vLLM's KVEventsConfig, field for field, with its defaults.
struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  std::string publisher = "null";  // "null" | "zmq" (vLLM: "zmq" when enabled and not given)
  std::string endpoint = "tcp://*:5557";
  std::optional<std::string> replay_endpoint;
  int buffer_steps = 10'000;   // batches kept for the replay socket
  int hwm = 100'000;           // ZMQ high-water mark of the PUB socket
  int max_queue_size = 100'000;  // batches waiting for the publisher thread (beyond: dropped)
  std::string topic;

  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};

// vLLM's cache-group numbering and kinds (KVCacheSpecKind) for this model.
inline constexpr int kAttentionGroup = 0;
inline constexpr int kGdnStateGroup = 1;
inline constexpr const char* kAttentionGroupKind = "full_attention";
inline constexpr const char* kGdnStateGroupKind = "mamba";
// vLLM's MEDIUM_GPU: the engine's own cache tier (vLLM publishes it on every platform).
inline constexpr const char* kMediumPrimary = "GPU";

struct BlockStoredEvent {
  std::vector<std::uint64_t> block_hashes;
  std::optional<std::uint64_t> parent_block_hash;  // none: the first block of a sequence
  std::vector<std::int32_t> token_ids;             // block_size per hash, in order
  int block_size = 0;
  // The extra keys mixed into each block's hash (one entry per hash; nullopt = none): the
  // cache_salt key on a sequence's first block.
  std::vector<std::optional<std::vector<std::uint64_t>>> extra_keys;
  int group_idx = kAttentionGroup;
};

struct BlockRemovedEvent {
  std::vector<std::uint64_t> block_hashes;
  int group_idx = kAttentionGroup;
};

struct AllBlocksClearedEvent {};

using KvCacheEvent = std::variant<BlockStoredEvent, BlockRemovedEvent, AllBlocksClearedEvent>;

struct KvEventBatch {
  double ts = 0.0;  // seconds since the Unix epoch (Python's time.time())
  std::vector<KvCacheEvent> events;
  std::optional<int> data_parallel_rank;
};

// Where the cache's emit points put events (engine thread only). Null pointers everywhere mean
// events are off and cost nothing.
class KvEventRecorder {
 public:
  void block_stored(BlockStoredEvent e) { pending_.emplace_back(std::move(e)); }
  void block_removed(int group_idx, std::uint64_t hash);
  void all_blocks_cleared() { pending_.emplace_back(AllBlocksClearedEvent{}); }

  bool empty() const { return pending_.empty(); }
  std::size_t size() const { return pending_.size(); }
  const std::vector<KvCacheEvent>& pending() const { return pending_; }
  // The events recorded since the last take, in order.
  std::vector<KvCacheEvent> take();

 private:
  std::vector<KvCacheEvent> pending_;
};

}  // namespace fp4serve::engine
