#include "tools/gpu_memory_setup.h"

#include <algorithm>
#include <optional>

#include "model/paged_kv_cache.h"
#include "model/state_arena.h"
#include "model/step_workspace.h"
#include "tools/device_choice.h"

namespace fp4serve::tools {

engine::CachePlanInput cache_plan_input(const model::Qwen35MoeModel& model, const engine::EngineConfig& c) {
  const ModelConfig& mc = model.config();
  const int num_gdn = static_cast<int>(mc.num_linear_attention_layers());
  const int num_attn = static_cast<int>(mc.num_full_attention_layers());
  engine::CachePlanInput in;
  in.max_num_seqs = c.max_num_seqs;
  in.max_num_seqs_explicit = c.max_num_seqs > 0;
  in.max_model_len = c.max_model_len;
  in.block_size = c.block_size;
  in.kv_block_bytes = model::PagedKvCache::block_bytes(num_attn + (c.mtp ? 1 : 0), c.block_size,
                                                      static_cast<int>(mc.num_key_value_heads),
                                                      static_cast<int>(mc.head_dim), c.kv_dtype);
  in.state_bytes_per_seq = num_gdn > 0 ? model::GdnStateArena::entry_bytes(num_gdn, model.gdn_dims()) : 0;
  in.rollback_entries_per_seq = c.mtp ? c.num_speculative_tokens : 0;
  in.prefix_caching = c.enable_prefix_caching;
  in.snapshot_fraction = c.snapshot_fraction;
  in.num_kv_blocks_override = c.num_kv_blocks_override;
  in.kv_dtype_name = c.kv_dtype == kernels::KvDtype::kBf16 ? "bf16" : "fp8_e4m3";
  in.device_label = "GPU";
  return in;
}

GpuMemoryPlan plan_device_memory(const model::Qwen35MoeModel& model, const EngineFlags& f,
                                 engine::EngineConfig& c) {
  kernels::Backend& backend = model.backend();
  const DeviceMemory after_load = device_memory(backend);
  GpuMemoryPlanInput in;
  in.device_name = after_load.name;
  in.total_bytes = after_load.total_bytes;
  in.free_at_start = after_load.free_at_start;
  in.gpu_memory_utilization = parse_gpu_memory_utilization(f.gpu_memory_utilization);
  in.kv_cache_memory_bytes = f.kv_cache_memory.empty() ? 0 : parse_byte_size(f.kv_cache_memory, "--kv-cache-memory-bytes");
  in.weight_bytes = after_load.free_at_start > after_load.free_bytes ? after_load.free_at_start - after_load.free_bytes : 0;
  // The activation peak: the engine's model runner reserves the backend's scratch and holds one
  // step workspace at these limits (engine/model_runner.cpp step_limits; max_num_seqs is at most 256
  // when the plan chooses it). Reserved here, measured, and the workspace released again: the
  // scratch stays reserved (the engine's reserve() for the same limits then allocates nothing).
  kernels::StepLimits limits;
  limits.max_tokens = std::max(1, c.max_num_batched_tokens);
  limits.max_seqs = c.max_num_seqs > 0 ? c.max_num_seqs : 256;
  limits.max_logit_rows = limits.max_seqs;
  if (c.mtp && c.num_speculative_tokens > 0)
    limits.max_logit_rows = std::min(limits.max_seqs * (1 + c.num_speculative_tokens),
                                     std::max(limits.max_seqs, limits.max_tokens));
  limits.max_context = c.max_model_len;
  {
    backend.reserve(limits, model.shape());
    std::optional<model::StepWorkspace> ws;
    ws.emplace(backend, model.config(), limits);
    const DeviceMemory with_workspace = device_memory(backend);
    const std::uint64_t measured =
        after_load.free_bytes > with_workspace.free_bytes ? after_load.free_bytes - with_workspace.free_bytes : 0;
    in.activation_bytes = std::max<std::uint64_t>(measured, static_cast<std::uint64_t>(ws->bytes));
  }
  in.cache = cache_plan_input(model, c);
  GpuMemoryPlan plan = plan_gpu_memory(in);
  c.cache_memory_bytes = plan.cache_budget_bytes;
  return plan;
}

GpuMemoryPlan preview_gpu_memory_plan(const ModelFacts& model, const EngineFlags& f, const DeviceMemory& dev,
                                      std::uint64_t weight_bytes) {
  GpuMemoryPlanInput in;
  in.device_name = dev.name;
  in.total_bytes = dev.total_bytes;
  in.free_at_start = dev.free_at_start;
  in.gpu_memory_utilization = parse_gpu_memory_utilization(f.gpu_memory_utilization);
  in.kv_cache_memory_bytes = f.kv_cache_memory.empty() ? 0 : parse_byte_size(f.kv_cache_memory, "--kv-cache-memory-bytes");
  in.weight_bytes = weight_bytes;
  in.cache = preview_cache_plan_input(model, f);
  in.cache.device_label = "GPU";
  return plan_gpu_memory(in);
}

}  // namespace fp4serve::tools
