// Counters and gauges the scheduler keeps for the engine to export (Prometheus, periodic log line).
#pragma once

#include <array>
#include <cstdint>

namespace fp4serve::engine {

// Most drafts one request verifies in one step (vLLM MAX_SPEC_LEN): bounds the per-position counters.
inline constexpr int kMaxSpeculativeTokens = 32;

// Speculative decoding counters, as vLLM's SpecDecodingStats (vllm/v1/spec_decode/metrics.py): one
// "draft" is one request verifying drafts in one step; accepted tokens are the drafts the target
// agreed with (the correction or bonus token is not counted). Acceptance rate = accepted / draft
// tokens; mean acceptance length = 1 + accepted / drafts.
struct SpecDecodeMetrics {
  int num_speculative_tokens = 0;         // configured drafts per step (0: off)
  std::int64_t num_drafts = 0;            // vllm:spec_decode_num_drafts
  std::int64_t num_draft_tokens = 0;      // vllm:spec_decode_num_draft_tokens
  std::int64_t num_accepted_tokens = 0;   // vllm:spec_decode_num_accepted_tokens
  std::array<std::int64_t, kMaxSpeculativeTokens> num_accepted_tokens_per_pos{};  // ..._per_pos{position}
};

struct SchedulerMetrics {
  // Gauges.
  int num_running = 0;                 // vllm:num_requests_running
  int num_waiting = 0;                 // vllm:num_requests_waiting (preempted ones included)
  double kv_cache_usage = 0.0;         // vllm:kv_cache_usage_perc, 0..1
  int state_slots_in_use = 0;
  int state_slots_total = 0;
  int snapshots_committed = 0;         // GDN prefix snapshots findable now
  int snapshots_capacity = 0;
  // Counters (monotonic).
  std::int64_t prefix_cache_queries = 0;  // tokens looked up, vllm:prefix_cache_queries
  std::int64_t prefix_cache_hits = 0;     // tokens restored, vllm:prefix_cache_hits
  std::int64_t num_preemptions = 0;       // vllm:num_preemptions
  std::int64_t prompt_tokens_computed = 0;  // prompt positions run through the model (hits excluded)
  std::int64_t generation_tokens = 0;     // tokens appended to outputs, vllm:generation_tokens
  std::int64_t kv_block_evictions = 0;    // cached blocks dropped to make room
  std::int64_t snapshot_evictions = 0;    // GDN snapshots dropped to make room
  std::int64_t num_steps = 0;             // schedule() calls that scheduled something
  SpecDecodeMetrics spec_decode;
};

}  // namespace fp4serve::engine
