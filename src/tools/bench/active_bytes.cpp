#include "tools/bench/active_bytes.h"

#include <cmath>

namespace fp4serve::tools::bench {

ActiveBytes active_bytes(const TensorPlan& plan, const ModelConfig& config) {
  ActiveBytes a;
  a.per_token = plan.active_bytes_per_token();
  a.num_experts = config.num_experts;
  a.top_k = config.num_experts_per_tok;
  double routed = 0, one_expert = 0, embed_row = 0;
  for (const PlannedModule& m : plan.modules) {
    const double bytes = static_cast<double>(m.byte_size());
    if (m.kind == ModuleKind::kRoutedExperts) {
      routed += bytes * m.active_fraction;
      one_expert += bytes / static_cast<double>(m.num_experts);
    } else if (m.kind == ModuleKind::kEmbedding) {
      embed_row += bytes * m.active_fraction;
    }
  }
  a.routed_experts = static_cast<uint64_t>(std::llround(routed));
  a.one_expert_all_layers = static_cast<uint64_t>(std::llround(one_expert));
  a.embedding_row = static_cast<uint64_t>(std::llround(embed_row));
  const uint64_t per_token_parts = a.routed_experts + a.embedding_row;
  a.shared = a.per_token > per_token_parts ? a.per_token - per_token_parts : 0;
  return a;
}

double expected_step_bytes(const ActiveBytes& a, int64_t batch) {
  if (batch <= 1) return static_cast<double>(a.per_token);
  double distinct = 0;
  if (a.num_experts > 0) {
    const double E = static_cast<double>(a.num_experts), k = static_cast<double>(a.top_k);
    distinct = E * (1.0 - std::pow(1.0 - k / E, static_cast<double>(batch)));
  }
  return static_cast<double>(a.shared) + static_cast<double>(batch) * static_cast<double>(a.embedding_row) +
         distinct * static_cast<double>(a.one_expert_all_layers);
}

}  // namespace fp4serve::tools::bench
