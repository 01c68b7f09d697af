// How the engine splits its cache memory budget (--kv-cache-memory) between the three things that
// grow with load: GDN state slots for running sequences, GDN snapshots for the prefix cache, and
// the paged KV cache of the attention layers. Every impossible request is refused here, at
// start-up, with the arithmetic in the message; the chosen split is logged.
//
// Policy: slots first (max_num_seqs of them, each with its speculative-decoding rollback entries;
// at most half the budget, so KV keeps room), then
// snapshots (snapshot_fraction of what is left, when prefix caching is on), KV the rest. One
// request of max_model_len tokens must fit the KV cache (vLLM refuses the same way).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp4serve::engine {

struct CachePlanInput {
  std::uint64_t budget_bytes = 0;
  int max_num_seqs = 0;           // 0 = as many as half the budget holds, at most 256
  bool max_num_seqs_explicit = false;
  int max_model_len = 0;
  int block_size = 16;
  std::uint64_t kv_block_bytes = 0;        // one block, all attention layers, K and V
  std::uint64_t state_bytes_per_seq = 0;   // one GDN slot (0: no GDN layers)
  int rollback_entries_per_seq = 0;        // GDN rollback entries per sequence (num_speculative_tokens)
  bool prefix_caching = true;
  double snapshot_fraction = 0.25;
  std::string kv_dtype_name = "bf16";
  std::string device_label = "CPU";  // "GPU" on a device backend: vLLM's "GPU KV cache size" line
  int num_kv_blocks_override = 0;  // vLLM --num-gpu-blocks-override: use this many blocks (tests)
};

struct CachePlan {
  int max_num_seqs = 0;
  int num_state_slots = 0;
  int num_snapshots = 0;
  int num_kv_blocks = 0;
  int num_rollback_entries = 0;  // max_num_seqs x rollback_entries_per_seq (with GDN layers)
  std::uint64_t state_bytes = 0, snapshot_bytes = 0, kv_bytes = 0, rollback_bytes = 0;
  std::int64_t kv_tokens = 0;
  double max_concurrency = 0.0;  // requests of max_model_len tokens that fit at once
  std::vector<std::string> log_lines;
};

// Throws EngineConfigError with the reason and the numbers.
CachePlan plan_cache(const CachePlanInput& in);

}  // namespace fp4serve::engine
