// Host-side planning of one MoE call on CUDA: where each temporary lives in the op's scratch block
// and the launch geometry of the block's kernels. Everything here depends only on the step's token
// count T and the model's shapes (never on the routing, which stays on the device), so the grids
// are known before any kernel runs. Tested on the CPU (tests/unit/kernels/cuda_moe_plan_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/moe.h"

namespace fp4serve::kernels::cuda {

struct MoeDims {
  int64_t tokens = 0;        // T
  int64_t hidden = 0;        // H
  int64_t intermediate = 0;  // I (routed experts)
  int64_t shared_intermediate = 0;  // Is (0 without a shared expert)
  int64_t experts = 0;       // E
  int64_t top_k = 0;         // k
};

// A region of the scratch block: [offset, offset + bytes), offset a multiple of kMoeAlign.
// Regions are disjoint except where one is written only after the other's last reader on the
// stream: down lies over x_sorted/gate/up, s_down over s_gate/s_up (moe_plan.cpp).
struct MoeRegion {
  std::size_t offset = 0, bytes = 0;
};

inline constexpr std::size_t kMoeAlign = 256;
inline constexpr int kMoeRouteWarps = 4;  // tokens per block of the route kernel (one warp each)

struct MoePlan {
  int64_t pairs = 0;        // R = T * k: routed rows
  int64_t sort_chunks = 0;  // ceil(R / kSortChunk)
  // Routing.
  MoeRegion logits;    // f32 [T, E]   router output
  MoeRegion idx;       // i32 [T, k]   chosen experts, rank order
  MoeRegion weight;    // f32 [T, k]   their bf16 weights
  MoeRegion hist;      // i32 [chunks, E]
  MoeRegion offsets;   // i32 [E + 1]
  MoeRegion row_token; // i32 [R]      grouped row -> token
  MoeRegion row_of;    // i32 [T, k]   pair -> grouped row
  // Routed experts, grouped order.
  MoeRegion x_sorted;  // bf16 [R, H]
  MoeRegion gate;      // f32 [R, I]
  MoeRegion up;        // f32 [R, I]
  MoeRegion act;       // bf16 [R, I]  SwiGLU
  MoeRegion down;      // f32 [R, H]
  // Shared expert (empty without one).
  MoeRegion s_gate;    // f32 [T, Is]
  MoeRegion s_up;      // f32 [T, Is]
  MoeRegion s_score;   // f32 [T, 1]   shared_expert_gate
  MoeRegion s_act;     // bf16 [T, Is]
  MoeRegion s_down;    // f32 [T, H]
  std::size_t total = 0;  // bytes of the whole block
};

// Throws std::invalid_argument (naming "moe") on shapes the kernels do not take: E outside
// [1, kMaxExperts], k outside [1, E], non-positive sizes, T < 0, or counts past int32 indexing.
MoePlan plan_moe(const MoeDims& d);

// The block's dimensions from its weights (tokens = 0), with moe_cpu.cpp's shape checks (the same
// messages) plus the CUDA kernels' limits; throws std::invalid_argument.
MoeDims moe_dims(const MoeWeights& w);

// Blocks of the route kernel (kMoeRouteWarps tokens each).
int64_t moe_route_blocks(int64_t tokens);

}  // namespace fp4serve::kernels::cuda
