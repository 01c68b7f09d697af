#include "tools/gpu_memory_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/engine_error.h"

namespace fp4serve::tools {
namespace {

double gib(std::uint64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(1ull << 30); }

// The engine's plan, with its refusals turned into this planner's error type.
engine::CachePlan engine_plan(engine::CachePlanInput in, std::uint64_t budget, const char* what) {
  in.budget_bytes = budget;
  in.kv_dtype_name = in.kv_dtype_name.empty() ? "bf16" : in.kv_dtype_name;
  try {
    return engine::plan_cache(in);
  } catch (const engine::EngineConfigError& e) {
    throw GpuMemoryPlanError(fmt::format("{}: {}", what, e.what()));
  }
}

}  // namespace

std::string with_thousands(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

double parse_gpu_memory_utilization(const std::string& text) {
  if (text.empty()) return 0.9;
  double u = 0;
  std::size_t pos = 0;
  try {
    u = std::stod(text, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != text.size() || !(u > 0 && u <= 1))
    throw GpuMemoryPlanError(fmt::format("--gpu-memory-utilization {} must be a fraction in (0, 1]", text));
  return u;
}

void check_weights_fit(const std::string& name, std::uint64_t total, double util, std::uint64_t weights,
                       bool explicit_cache_budget) {
  if (weights > total)
    throw GpuMemoryPlanError(fmt::format(
        "the model's weights ({:.2f} GiB) are larger than the memory of {} ({:.2f} GiB): they cannot be loaded on "
        "this GPU; use a GPU with more memory, a smaller checkpoint, or --device cpu",
        gib(weights), name, gib(total)));
  const auto allowed = static_cast<std::uint64_t>(util * static_cast<double>(total));
  if (!explicit_cache_budget && weights >= allowed)
    throw GpuMemoryPlanError(fmt::format(
        "the model's weights ({:.2f} GiB) leave nothing of the {:.2f} GiB that --gpu-memory-utilization {:.2f} allows "
        "on {} ({:.2f} GiB): no memory for activations and the KV cache. Try increasing `gpu_memory_utilization`, "
        "or use a GPU with more memory",
        gib(weights), gib(allowed), util, name, gib(total)));
}

GpuMemoryPlan plan_gpu_memory(const GpuMemoryPlanInput& in) {
  if (in.total_bytes == 0) throw GpuMemoryPlanError("memory plan: the device reports no memory");
  if (!(in.gpu_memory_utilization > 0 && in.gpu_memory_utilization <= 1))
    throw GpuMemoryPlanError(
        fmt::format("--gpu-memory-utilization {} must be a fraction in (0, 1]", in.gpu_memory_utilization));
  const bool explicit_budget = in.kv_cache_memory_bytes > 0;
  GpuMemoryPlan p;
  const std::uint64_t fixed = in.weight_bytes + in.activation_bytes;
  if (explicit_budget) {
    p.cache_budget_bytes = in.kv_cache_memory_bytes;
    p.requested_bytes = fixed + in.kv_cache_memory_bytes;
    if (p.requested_bytes > in.total_bytes)
      throw GpuMemoryPlanError(fmt::format(
          "--kv-cache-memory-bytes {:.2f} GiB plus the weights ({:.2f} GiB) and activations ({:.2f} GiB) is more than "
          "the {:.2f} GiB of {}: decrease --kv-cache-memory-bytes",
          gib(in.kv_cache_memory_bytes), gib(in.weight_bytes), gib(in.activation_bytes), gib(in.total_bytes),
          in.device_name));
  } else {
    p.requested_bytes = static_cast<std::uint64_t>(in.gpu_memory_utilization * static_cast<double>(in.total_bytes));
    // [vllm: v1/worker/gpu_worker.py] the utilization is of the total; the free memory at start must cover it.
    if (in.free_at_start > 0 && in.free_at_start < p.requested_bytes)
      throw GpuMemoryPlanError(fmt::format(
          "Free memory on device {} ({:.2f}/{:.2f} GiB) on startup is less than desired GPU memory utilization "
          "({:.2f}, {:.2f} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
          in.device_name, gib(in.free_at_start), gib(in.total_bytes), in.gpu_memory_utilization,
          gib(p.requested_bytes)));
    check_weights_fit(in.device_name, in.total_bytes, in.gpu_memory_utilization, in.weight_bytes, false);
    if (fixed >= p.requested_bytes)
      throw GpuMemoryPlanError(fmt::format(
          "No available memory for the cache blocks: of the {:.2f} GiB that --gpu-memory-utilization {:.2f} allows "
          "on {}, the weights take {:.2f} GiB and the activations {:.2f} GiB. Try increasing `gpu_memory_utilization` "
          "or decreasing --max-num-batched-tokens / --max-num-seqs when initializing the engine.",
          gib(p.requested_bytes), in.gpu_memory_utilization, in.device_name, gib(in.weight_bytes),
          gib(in.activation_bytes)));
    p.cache_budget_bytes = p.requested_bytes - fixed;
  }
  // The split does not depend on max_model_len; plan once at one block to learn the capacity, so a
  // too-small cache gets vLLM's message with the longest request it could hold.
  engine::CachePlanInput probe = in.cache;
  probe.max_model_len = std::max(1, in.cache.block_size);
  const engine::CachePlan capacity = engine_plan(probe, p.cache_budget_bytes, "memory plan");
  const int block = std::max(1, in.cache.block_size);
  const std::uint64_t blocks_per_request = (static_cast<std::uint64_t>(in.cache.max_model_len) + block - 1) / block;
  if (capacity.kv_tokens < in.cache.max_model_len) {
    throw GpuMemoryPlanError(fmt::format(
        "To serve at least one request with the model's max seq len ({}), ({:.2f} GiB KV cache is needed, which is "
        "larger than the available KV cache memory ({:.2f} GiB). Based on the available memory, the estimated maximum "
        "model length is {}. Try increasing `{}` or decreasing `max_model_len` when initializing the engine.",
        in.cache.max_model_len, gib(blocks_per_request * in.cache.kv_block_bytes), gib(capacity.kv_bytes),
        capacity.kv_tokens, explicit_budget ? "kv_cache_memory_bytes" : "gpu_memory_utilization"));
  }
  p.cache = engine_plan(in.cache, p.cache_budget_bytes, "memory plan");
  p.gdn_state_bytes = p.cache.state_bytes + p.cache.rollback_bytes + p.cache.snapshot_bytes;
  p.kv_tokens = p.cache.kv_tokens;
  p.max_concurrency = p.cache.max_concurrency;
  const std::uint64_t used = fixed + p.cache.kv_bytes + p.gdn_state_bytes;
  p.log_lines.push_back(fmt::format(
      "Memory plan on {} ({:.2f} GiB): {}; weights {:.2f} GiB, activations {:.2f} GiB, KV cache {:.2f} GiB, GDN state "
      "{:.2f} GiB ({} slots, {} rollback entries, {} snapshots), {:.2f} GiB of the plan unused",
      in.device_name, gib(in.total_bytes),
      explicit_budget ? fmt::format("--kv-cache-memory-bytes {:.2f} GiB (--gpu-memory-utilization not used)",
                                    gib(in.kv_cache_memory_bytes))
                      : fmt::format("--gpu-memory-utilization {:.2f} = {:.2f} GiB", in.gpu_memory_utilization,
                                    gib(p.requested_bytes)),
      gib(in.weight_bytes), gib(in.activation_bytes), gib(p.cache.kv_bytes), gib(p.gdn_state_bytes),
      p.cache.num_state_slots, p.cache.num_rollback_entries, p.cache.num_snapshots,
      gib(p.requested_bytes > used ? p.requested_bytes - used : 0)));
  p.log_lines.push_back(fmt::format("Available KV cache memory: {:.2f} GiB", gib(p.cache_budget_bytes)));
  p.log_lines.push_back(fmt::format("GPU KV cache size: {} tokens", with_thousands(p.kv_tokens)));
  p.log_lines.push_back(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x",
                                    with_thousands(in.cache.max_model_len), p.max_concurrency));
  return p;
}

}  // namespace fp4serve::tools
