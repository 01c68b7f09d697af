// vLLM's memory plan on a GPU (--gpu-memory-utilization, --kv-cache-memory-bytes), as a pure
// function so it is tested without a device.
//
// vLLM [v1/worker/gpu_worker.py determine_available_memory, v1/core/kv_cache_utils.py]: the engine
// may use gpu_memory_utilization x the device's TOTAL memory; the weights and the activation peak
// (here: the step workspace plus the backend's scratch reserve at the step limits, measured after the
// load) come out of it first, and what is left is the cache budget: KV blocks plus the GDN state slots,
// rollback entries and prefix snapshots, split by the engine's own plan_cache (engine/cache_plan.h)
// so that the numbers logged here are the engine's. --kv-cache-memory-bytes gives the cache budget
// directly and the utilization is then not used (vLLM: "kv_cache_memory_bytes ... overrides
// gpu_memory_utilization").
//
// Refusals, with vLLM's wording where vLLM has one: less free memory at start than the utilization
// asks for, weights larger than the allowed memory, no memory left for the cache, and a cache that
// cannot hold one request of max_model_len tokens (with the longest one it could hold).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cache_plan.h"

namespace fp4serve::tools {

class GpuMemoryPlanError : public std::runtime_error {
 public:
  explicit GpuMemoryPlanError(const std::string& what) : std::runtime_error(what) {}
};

struct GpuMemoryPlanInput {
  std::string device_name = "GPU";
  std::uint64_t total_bytes = 0;            // the device's memory
  std::uint64_t free_at_start = 0;          // free before the weights were loaded (0: unknown, not checked)
  double gpu_memory_utilization = 0.9;      // vLLM's default
  std::uint64_t kv_cache_memory_bytes = 0;  // --kv-cache-memory(-bytes): the cache budget itself (0: from the utilization)
  std::uint64_t weight_bytes = 0;           // device memory the weights took
  std::uint64_t activation_bytes = 0;       // step workspace + scratch reserve at the step limits
  // The engine's cache plan input without its budget: kv_block_bytes (= KV bytes per token x
  // block_size), state_bytes_per_seq (one GDN slot), max_model_len, max_num_seqs, prefix caching...
  engine::CachePlanInput cache;
};

struct GpuMemoryPlan {
  std::uint64_t requested_bytes = 0;     // utilization x total (the explicit budget + weights + activations with --kv-cache-memory-bytes)
  std::uint64_t cache_budget_bytes = 0;  // KV + GDN state: the engine's cache_memory_bytes
  std::uint64_t gdn_state_bytes = 0;     // slots + rollback entries + snapshots
  engine::CachePlan cache;               // the engine's split of cache_budget_bytes
  std::int64_t kv_tokens = 0;            // "GPU KV cache size: N tokens"
  double max_concurrency = 0;            // "Maximum concurrency for max_model_len tokens per request: X.XXx"
  std::vector<std::string> log_lines;    // the split, then vLLM's three lines
};

// Throws GpuMemoryPlanError with the numbers and what to change.
GpuMemoryPlan plan_gpu_memory(const GpuMemoryPlanInput& in);

// Before the load: refuses weights (the checkpoint's size as the estimate) that cannot fit the
// memory the utilization allows, so a 22 GB model on a 16 GB card fails before reading a byte.
void check_weights_fit(const std::string& device_name, std::uint64_t total_bytes, double gpu_memory_utilization,
                       std::uint64_t weight_bytes_estimate, bool explicit_cache_budget);

// --gpu-memory-utilization's text -> the fraction (default 0.9 when empty). Throws for a value
// outside (0, 1].
double parse_gpu_memory_utilization(const std::string& text);

// 1234567 -> "1,234,567" (vLLM logs its token counts with thousands separators).
std::string with_thousands(std::int64_t n);

}  // namespace fp4serve::tools
