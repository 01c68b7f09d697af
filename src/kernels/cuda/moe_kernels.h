// Launchers of the MoE block's kernels (moe_route.cu: routing, sort, gather; moe_expert.cu:
// SwiGLU, combine). Each enqueues on `stream` (an op passes its context: launches go through its step-graph recorder)
// and returns; the caller (moe_cuda.cu) checks the launch. Pointers are device memory laid out by moe_plan.h; the grid
// of every launch follows from T and k alone (never from what the router chose).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch_target.h"

namespace fp4serve::kernels::cuda {

// logits f32 [T, E] -> idx [T, k] (rank order) and weight [T, k] (bf16 values), moe_route.h's steps.
void launch_moe_route(const LaunchTarget& stream, const float* logits, int64_t T, int E, int k, int32_t* idx,
                      float* weight);

// idx [pairs] -> offsets [E + 1], row_token [pairs] (grouped row -> token), row_of [pairs] (pair ->
// grouped row); hist [ceil(pairs / kSortChunk), E] is scratch. moe_sort.h's steps.
void launch_moe_sort(const LaunchTarget& stream, const int32_t* idx, int64_t pairs, int E, int k, int32_t* hist,
                     int32_t* offsets, int32_t* row_token, int32_t* row_of);

// Both of the above; a step of at most kSortChunk pairs (moe_route_sort_fused: decode) in one
// block and one launch, with the same results (hist then unused).
bool moe_route_sort_fused(int64_t pairs);
void launch_moe_route_sort(const LaunchTarget& stream, const float* logits, int64_t T, int E, int k, int32_t* idx,
                           float* weight, int32_t* hist, int32_t* offsets, int32_t* row_token, int32_t* row_of);

// out [rows, H] bf16: row r = x[row_token[r]] (x [T, H] bf16, contiguous).
void launch_moe_gather(const LaunchTarget& stream, const uint16_t* x, int64_t H, const int32_t* row_token, int64_t rows,
                       uint16_t* out);

// h [n] bf16 = SwiGLU(g, u) element-wise (moe_math.h's swiglu), for one or two jobs in one launch
// (the routed experts' rows and the shared expert's).
struct SwigluJob {
  const float* g = nullptr;
  const float* u = nullptr;
  int64_t n = 0;
  uint16_t* h = nullptr;
};
void launch_moe_swiglu(const LaunchTarget& stream, const SwigluJob& a, const SwigluJob& b = {});

// out [T, H] bf16: per token, its routed rows of down [pairs, H] f32 scaled by their weights and
// summed in ascending expert id (HF eager), then the gated shared expert when s_down is not null
// (s_score [T] f32: shared_expert_gate's output; s_down [T, H] f32).
void launch_moe_combine(const LaunchTarget& stream, const float* down, const int32_t* idx, const float* weight,
                        const int32_t* row_of, int64_t T, int k, int64_t H, const float* s_score, const float* s_down,
                        uint16_t* out);

}  // namespace fp4serve::kernels::cuda
