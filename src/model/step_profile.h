// Where the time of a forward step goes, by layer kind (for `fp4serve bench model`): an optional
// out-parameter of Qwen35MoeModel::forward_batch. Off (nullptr) by default; when off the step reads
// no clock. Times accumulate over calls, so a caller can profile N steps and divide.
#pragma once

#include <cstdint>

namespace fp4serve::model {

struct StepProfile {
  double gdn_s = 0;        // Gated DeltaNet token mixers (projections, conv, delta rule, gated norm)
  double attention_s = 0;  // gated attention token mixers (projections, RoPE, KV write, attention)
  double moe_s = 0;        // sparse MoE blocks (router, routed and shared experts)
  double lm_head_s = 0;    // final norm + lm_head on the rows that need logits
  double total_s = 0;      // the whole forward_batch call (the rest: embedding, norms, residual adds)
  int64_t gdn_layers = 0;  // layer executions counted in gdn_s (layers x steps)
  int64_t attention_layers = 0;
  int64_t moe_blocks = 0;
  int64_t steps = 0;

  double other_s() const { return total_s - gdn_s - attention_s - moe_s - lm_head_s; }
};

}  // namespace fp4serve::model
