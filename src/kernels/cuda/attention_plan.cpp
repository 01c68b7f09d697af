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

void check_plan_seqs(std::span<const PlanSeq> seqs, int head_dim) {
  if (head_dim <= 0 || head_dim > kMaxHeadDim)
    throw std::invalid_argument("attention plan: head_dim " + std::to_string(head_dim) + " outside 1 .. " +
                                std::to_string(kMaxHeadDim));
  if (seqs.size() > static_cast<std::size_t>(std::numeric_limits<int32_t>::max()))
    throw std::invalid_argument("attention plan: too many sequences");
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    const PlanSeq& s = seqs[i];
    if (s.rows < 0 || s.n_kv_heads <= 0 || s.group <= 0 || (s.causal && s.pos0 < 0))
      throw std::invalid_argument("attention plan: malformed sequence " + std::to_string(i));
    if (s.rows * s.group > std::numeric_limits<int32_t>::max() / 2)
      throw std::invalid_argument("attention plan: too many rows in sequence " + std::to_string(i));
  }
}

PlanBounds plan_bounds(std::span<const PlanSeq> seqs, int head_dim, std::size_t split_budget_bytes) {
  PlanBounds b;
  bool may_split = false;
  for (const PlanSeq& s : seqs) {
    if (s.rows <= 0) continue;
    b.units += s.n_kv_heads * query_blocks(s);
    may_split = may_split || (s.causal && s.rows <= kSplitMaxRows);
  }
  if (may_split) b.max_partials = static_cast<int64_t>(split_budget_bytes / partial_bytes(head_dim));
  if (b.first() > std::numeric_limits<int32_t>::max())
    throw std::invalid_argument("attention plan: too many query blocks in one op");
  return b;
}

Plan plan_attention(std::span<const PlanSeq> seqs, int head_dim, std::size_t split_budget_bytes) {
  check_plan_seqs(seqs, head_dim);
  Plan plan;
  plan.seqs.resize(seqs.size());
  PlanCounts counts;
  plan_sequences(seqs, static_cast<int64_t>(seqs.size()), head_dim, split_budget_bytes, plan.seqs.data(), &counts);
  plan.partials = counts.partials;
  plan.first.resize(static_cast<std::size_t>(counts.first));
  plan.second.resize(static_cast<std::size_t>(counts.second));
  plan.merge.resize(static_cast<std::size_t>(counts.merge));
  plan_items(seqs, plan.seqs.data(), static_cast<int64_t>(seqs.size()), 0, 1, plan.first.data(), plan.second.data(),
             plan.merge.data());
  return plan;
}

std::size_t partial_stats_bytes(int64_t partials) {
  return align256(static_cast<std::size_t>(partials) * 2 * sizeof(float));
}

std::size_t partial_out_bytes(int64_t partials, int head_dim) {
  return align256(static_cast<std::size_t>(partials) * static_cast<std::size_t>(head_dim) * sizeof(float));
}

std::size_t partial_scores_bytes(int64_t partials) {
  return align256(static_cast<std::size_t>(partials) * static_cast<std::size_t>(kChunkKeys) * sizeof(float));
}

std::size_t partial_stats_bytes(const Plan& plan) { return partial_stats_bytes(plan.partials); }
std::size_t partial_out_bytes(const Plan& plan, int head_dim) { return partial_out_bytes(plan.partials, head_dim); }
std::size_t partial_scores_bytes(const Plan& plan) { return partial_scores_bytes(plan.partials); }

}  // namespace fp4serve::kernels::cuda::attn
