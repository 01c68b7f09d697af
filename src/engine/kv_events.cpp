#include "engine/kv_events.h"

namespace fp4serve::engine {

void KvEventRecorder::block_removed(int group_idx, std::uint64_t hash) {
  // vLLM emits one BlockRemoved per evicted block (BlockPool._maybe_evict_cached_block).
  BlockRemovedEvent e;
  e.block_hashes.push_back(hash);
  e.group_idx = group_idx;
  pending_.emplace_back(std::move(e));
}

std::vector<KvCacheEvent> KvEventRecorder::take() {
  std::vector<KvCacheEvent> out;
  out.swap(pending_);
  return out;
}

}  // namespace fp4serve::engine
