// The weight bytes a decode step reads, from a checkpoint's TensorPlan (the same numbers as
// `fp4serve inspect`'s "active bytes per token", which is TensorPlan::active_bytes_per_token()):
// every non-expert weight, top_k of E routed experts, the shared expert, the lm_head and one
// embedding row. Split so a batch-B step can be estimated too (it reads more distinct experts).
#pragma once

#include <cstdint>

#include "checkpoint/tensor_plan.h"

namespace fp4serve::tools::bench {

struct ActiveBytes {
  uint64_t per_token = 0;             // batch 1: TensorPlan::active_bytes_per_token()
  uint64_t routed_experts = 0;        // the top-k experts' share of per_token (all layers)
  uint64_t one_expert_all_layers = 0; // bytes of one routed expert summed over the layers
  uint64_t embedding_row = 0;         // one row of embed_tokens
  uint64_t shared = 0;                // everything else: read once per step whatever the batch
  int64_t num_experts = 0;
  int64_t top_k = 0;
};

ActiveBytes active_bytes(const TensorPlan& plan, const ModelConfig& config);

// Expected weight bytes of one decode step of `batch` tokens whose experts are routed uniformly at
// random: shared + batch embedding rows + E x (1 - (1 - k/E)^batch) distinct experts per layer.
// At batch 1 this is per_token.
double expected_step_bytes(const ActiveBytes& a, int64_t batch);

}  // namespace fp4serve::tools::bench
