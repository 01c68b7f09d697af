// The CPU entry points of the sparse MoE block (kernels/moe.h has the weights' description and the
// math): routing, grouping tokens by expert, and the whole block.
#pragma once

#include <cstdint>
#include <vector>
#include "kernels/cpu/cpu_features.h"
#include "kernels/moe.h"

namespace fp4serve::kernels {

using cpu::Isa;

// logits: [T, E] floats (bf16 values). idx: [T, top_k] expert ids (descending weight);
// weights: [T, top_k] bf16 values.
void moe_route(const float* logits, int64_t T, int E, int top_k, int32_t* idx, float* weights);

// Tokens grouped by expert: rows offsets[e] .. offsets[e+1] of the grouped order are the (token,
// slot) pairs routed to expert e, tokens ascending. This is the order the expert GEMMs run in.
struct ExpertGroups {
  std::vector<int32_t> offsets;  // E + 1
  std::vector<int32_t> token;    // T * top_k
  std::vector<int32_t> slot;     // T * top_k: index into the token's top_k list
};
ExpertGroups group_by_expert(const int32_t* idx, int64_t T, int top_k, int E);


// The whole block: x [T, H] bf16 -> out [T, H] bf16 (out may not alias x).
void moe_block(const uint16_t* x, int64_t T, const MoeWeights& w, uint16_t* out, Isa isa = cpu::active_isa(),
               MoeCombine combine = MoeCombine::kHfEager);

}  // namespace fp4serve::kernels
