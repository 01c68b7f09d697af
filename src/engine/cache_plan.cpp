#include "engine/cache_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "engine/engine_error.h"
#include "engine/state_pool.h"

namespace fp4serve::engine {

CachePlan plan_cache(const CachePlanInput& in) {
  if (in.kv_block_bytes == 0 || in.block_size <= 0 || in.max_model_len <= 0)
    throw EngineConfigError("cache plan: block size, block bytes and max_model_len must be positive");
  CachePlan p;
  const std::uint64_t state_budget = in.budget_bytes / 2;
  // A sequence's GDN state: its slot plus, with speculative decoding, its rollback entries.
  const std::uint64_t per_seq = in.state_bytes_per_seq * (1 + static_cast<std::uint64_t>(in.rollback_entries_per_seq));
  if (in.state_bytes_per_seq > 0) {
    if (in.max_num_seqs_explicit) {
      StateSlotPool::check_max_num_seqs(in.max_num_seqs, per_seq, state_budget);
      p.max_num_seqs = in.max_num_seqs;
    } else {
      p.max_num_seqs = std::min(in.max_num_seqs > 0 ? in.max_num_seqs : 256,
                                StateSlotPool::slots_for_budget(state_budget, per_seq));
      if (p.max_num_seqs < 1)
        throw EngineConfigError(fmt::format(
            "the cache budget of {} cannot hold one sequence's GDN state ({}; half the budget is for "
            "state slots): raise --kv-cache-memory",
            format_bytes(in.budget_bytes), format_bytes(per_seq)));
    }
    p.num_state_slots = p.max_num_seqs;
    p.state_bytes = static_cast<std::uint64_t>(p.num_state_slots) * in.state_bytes_per_seq;
    p.num_rollback_entries = p.max_num_seqs * in.rollback_entries_per_seq;
    p.rollback_bytes = static_cast<std::uint64_t>(p.num_rollback_entries) * in.state_bytes_per_seq;
  } else {
    p.max_num_seqs = in.max_num_seqs > 0 ? in.max_num_seqs : 256;
    p.num_state_slots = p.max_num_seqs;  // ids only: a model without GDN layers has nothing behind them
  }
  std::uint64_t left = in.budget_bytes - p.state_bytes - p.rollback_bytes;
  if (in.prefix_caching && in.state_bytes_per_seq > 0) {
    p.num_snapshots = static_cast<int>(static_cast<double>(left) * in.snapshot_fraction /
                                       static_cast<double>(in.state_bytes_per_seq));
    p.snapshot_bytes = static_cast<std::uint64_t>(p.num_snapshots) * in.state_bytes_per_seq;
    left -= p.snapshot_bytes;
  }
  p.num_kv_blocks = static_cast<int>(std::min<std::uint64_t>(left / in.kv_block_bytes, 1u << 30));
  if (in.num_kv_blocks_override > 0) p.num_kv_blocks = std::min(p.num_kv_blocks, in.num_kv_blocks_override);
  p.kv_bytes = static_cast<std::uint64_t>(p.num_kv_blocks) * in.kv_block_bytes;
  p.kv_tokens = static_cast<std::int64_t>(p.num_kv_blocks) * in.block_size;
  const int blocks_per_request = (in.max_model_len + in.block_size - 1) / in.block_size;
  if (p.num_kv_blocks < blocks_per_request) {
    throw EngineConfigError(fmt::format(
        "To serve at least one request with the model's max seq len ({}), {} KV cache is needed, which is "
        "larger than the available KV cache memory ({}). Try increasing --kv-cache-memory or decreasing "
        "--max-model-len.",
        in.max_model_len, format_bytes(static_cast<std::uint64_t>(blocks_per_request) * in.kv_block_bytes),
        format_bytes(p.kv_bytes)));
  }
  p.max_concurrency = std::min(static_cast<double>(p.kv_tokens) / in.max_model_len,
                               static_cast<double>(p.max_num_seqs));
  p.log_lines.push_back(fmt::format("{} KV cache size: {} tokens ({} blocks of {}, {}, {})",
                                    in.device_label, p.kv_tokens, p.num_kv_blocks, in.block_size, in.kv_dtype_name,
                                    format_bytes(p.kv_bytes)));
  p.log_lines.push_back(fmt::format("Maximum concurrency for {} tokens per request: {:.2f}x", in.max_model_len,
                                    p.max_concurrency));
  if (in.state_bytes_per_seq > 0) {
    p.log_lines.push_back(fmt::format("GDN state: {} slots x {} = {} (max_num_seqs {}{})", p.num_state_slots,
                                      format_bytes(in.state_bytes_per_seq), format_bytes(p.state_bytes),
                                      p.max_num_seqs, in.max_num_seqs_explicit ? "" : ", chosen to fit"));
    if (p.num_rollback_entries > 0)
      p.log_lines.push_back(fmt::format("Speculative decoding GDN rollback: {} entries x {} = {}", p.num_rollback_entries,
                                        format_bytes(in.state_bytes_per_seq), format_bytes(p.rollback_bytes)));
    p.log_lines.push_back(
        in.prefix_caching
            ? fmt::format("Prefix cache GDN snapshots: {} x {} = {}", p.num_snapshots,
                          format_bytes(in.state_bytes_per_seq), format_bytes(p.snapshot_bytes))
            : std::string("Prefix caching is off: no GDN snapshots"));
  }
  return p;
}

}  // namespace fp4serve::engine
