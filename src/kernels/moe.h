// Sparse MoE block of Qwen3.5/3.6 (docs/model-arch.md §2.4, §6.8), mirroring HF's eager
// Qwen3_5MoeSparseMoeBlock / Qwen3_5MoeExperts / Qwen3_5MoeTopKRouter in bf16:
//   logits = bf16(x @ router^T)
//   p = softmax(logits) fp32; top-k (larger first, ties to the lower expert id); w = p / sum(top-k p)
//   in fp32; w = bf16(w)
//   per expert e, for its tokens: g, u = bf16(x @ gate_e^T), bf16(x @ up_e^T)
//       h = bf16(bf16(silu(g)) * u);  d = bf16(h @ down_e^T);  r = bf16(d * w)
//   routed[t] = sum of the token's r over its top-k, in the order `MoeCombine` names (default: HF
//               eager, a bf16 index_add_ per expert in ascending id: acc = bf16(acc + r_e) from 0)
//   shared = bf16(bf16(sigmoid(bf16(x . shared_gate))) * SwiGLU_shared(x))   (same SwiGLU casts)
//   out = bf16(routed + shared)
// Every token's result depends only on its own row (linear.h is batch invariant), so the block is
// batch and thread invariant.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/weights.h"

namespace fp4serve::kernels {

struct ExpertWeights {
  WeightView gate;  // [I, H]
  WeightView up;    // [I, H]
  WeightView down;  // [H, I]
};

struct MoeWeights {
  WeightView router;                   // [E, H]
  std::vector<ExpertWeights> experts;  // E entries
  bool has_shared = true;
  ExpertWeights shared;                // shared_expert.{gate,up,down}_proj
  WeightView shared_gate;              // shared_expert_gate [1, H]
  int top_k = 8;
};

// How the routed experts' outputs are summed. HF has several experts backends
// (config._experts_implementation) and they round differently:
enum class MoeCombine : uint8_t {
  kHfEager,       // "eager": loop over hit experts in ascending id, bf16 index_add_ each
  kHfIndexAddSlots,  // "grouped_mm"/"batched_mm" (transformers 5.x): one index_add_ over (token, slot)
                     // pairs, i.e. bf16 adds in top-k slot order
  kFp32Sum,       // reshape(T, k, H).sum(1) in fp32, one bf16 rounding (later HF versions, vLLM-like)
};

}  // namespace fp4serve::kernels
