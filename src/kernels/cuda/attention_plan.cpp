#include "kernels/cuda/attention_plan.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp4serve::kernels::cuda::attn {
namespace {

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Plan plan_attention(std::span<const PlanSeq> seqs, int head_dim, std::size_t split_budget_bytes) {
  if (head_dim <= 0 || head_dim > kMaxHeadDim)
    throw std::invalid_argument("attention plan: head_dim " + std::to_string(head_dim) + " outside 1 .. " +
                                std::to_string(kMaxHeadDim));
  Plan plan;
  plan.seqs.resize(seqs.size());
  std::size_t budget_left = split_budget_bytes;
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const PlanSeq& s = seqs[i];
    if (s.rows < 0 || s.n_kv_heads <= 0 || s.group <= 0 || (s.causal && s.pos0 < 0))
      throw std::invalid_argument("attention plan: malformed sequence " + std::to_string(i));
    if (s.rows == 0) continue;
    const int64_t queries_per_head = s.rows * s.group;  // query rows of one kv head
    if (queries_per_head > std::numeric_limits<int32_t>::max() / 2 || i > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
      throw std::invalid_argument("attention plan: too many rows in sequence " + std::to_string(i));
    SeqPlan& sp = plan.seqs[i];
    sp.nchunks = chunks_for_keys(keys_of_row(s, s.rows - 1));
    const int64_t partials = s.n_kv_heads * queries_per_head * sp.nchunks;
    const std::size_t need = static_cast<std::size_t>(partials) * partial_bytes(head_dim);
    sp.split = s.causal && s.rows <= kSplitMaxRows && sp.nchunks > 1 && need <= budget_left;
    if (sp.split) {
      budget_left -= need;
      sp.partial_base = plan.partials;
      plan.partials += partials;
    }
    // Fused blocks last row first: causal blocks get longer with r0, and the longest ones should
    // start first rather than trail the launch (the order changes no result).
    const int64_t blocks = (queries_per_head + kQueriesPerBlock - 1) / kQueriesPerBlock;
    for (int kvh = 0; kvh < s.n_kv_heads; ++kvh)
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t r0 = (sp.split ? b : blocks - 1 - b) * kQueriesPerBlock;
        Item item;
        item.seq = static_cast<int32_t>(i);
        item.kvh = kvh;
        item.r0 = static_cast<int32_t>(r0);
        if (!sp.split) {
          plan.first.push_back(item);
          continue;
        }
        // The block's last query row has the most keys (causal): its chunks cover every query's.
        const int64_t last_t = (std::min(r0 + kQueriesPerBlock, queries_per_head) - 1) / s.group;
        const int64_t chunks = chunks_for_keys(keys_of_row(s, last_t));
        for (int64_t c = 0; c < chunks; ++c) {
          item.chunk = static_cast<int32_t>(c);
          item.mode = ItemMode::kStats;
          plan.first.push_back(item);
          item.mode = ItemMode::kOut;
          plan.second.push_back(item);
        }
        item.chunk = -1;
        item.mode = ItemMode::kOut;
        plan.merge.push_back(item);
      }
  }
  return plan;
}

std::size_t partial_stats_bytes(const Plan& plan) {
  return align256(static_cast<std::size_t>(plan.partials) * 2 * sizeof(float));
}

std::size_t partial_out_bytes(const Plan& plan, int head_dim) {
  return align256(static_cast<std::size_t>(plan.partials) * static_cast<std::size_t>(head_dim) * sizeof(float));
}

std::size_t partial_scores_bytes(const Plan& plan) {
  return align256(static_cast<std::size_t>(plan.partials) * static_cast<std::size_t>(kChunkKeys) * sizeof(float));
}

}  // namespace fp4serve::kernels::cuda::attn
