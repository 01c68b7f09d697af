// The msgpack bytes of a KvEventBatch exactly as vLLM's msgspec encoder writes a KVEventBatch
// (vllm/distributed/kv_events.py): the batch is positional (array_like=True), every field written
//   [ts (always float64), [event, ...], data_parallel_rank (nil when unset)]
// and each event a tagged map (tag field "type", the class name) holding every field without a
// default (possibly nil) and the defaulted ones only when set (omit_defaults=True):
//   {"type": "BlockStored", "block_hashes", "parent_block_hash", "token_ids", "block_size",
//    "lora_id", "medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind"}
//   {"type": "BlockRemoved", "block_hashes", "medium", "group_idx"}
//   {"type": "AllBlocksCleared"}
// in vLLM's field order. Hashes are msgpack unsigned integers (values >= 2^63 as uint64).
#pragma once

#include <string>

#include "engine/kv_events.h"

namespace fp4serve::engine {

std::string encode_kv_event_batch(const KvEventBatch& batch);

}  // namespace fp4serve::engine
