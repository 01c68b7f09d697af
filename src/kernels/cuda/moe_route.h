// Router softmax and top-k of one token as the steps of a warp (one warp per token; `lanes` = 32 on
// the GPU), each a __host__ __device__ function over plain arrays. The route kernel (moe_route.cu)
// calls them between its shuffles; tests/unit/kernels/cuda_moe_route_test.cpp runs the same steps
// for 32 simulated lanes and the same shuffle trees on the CPU and compares with moe_cpu.cpp's
// moe_route bit for bit (same experts, same weights).
//
// moe_route's operation order, reproduced here:
//   mx  = max over e of l[e]                  (exact in any order: a max rounds nothing)
//   p   = exp(l[e] - mx)                      (element-wise)
//   sum = p[0] + p[1] + ... + p[E-1]          (fp32, strictly in ascending e: one lane, serially)
//   p   = p[e] / sum                          (element-wise)
//   top-k by p, larger first, ties to the lower expert id (a strict total order, so k rounds of a
//         warp arg-max give exactly partial_sort's first k)
//   tsum = p_0 + ... + p_{k-1} in rank order; w_i = bf16(p_i / tsum)
// l[e] is the router's f32 logit rounded to bf16 (moe_block rounds the logits before routing).
// NaN or infinite logits: the CPU's routing is then unspecified; here it still yields k distinct
// expert ids in [0, E) (rank_key), so the kernels after it never index out of bounds.
#pragma once

#include <climits>

#include "kernels/cuda/moe_math.h"

namespace fp4serve::kernels::cuda::moe {

// An expert candidate in the arg-max rounds. `p` = -INFINITY marks an expert already taken (or a
// lane with no experts left); every untaken expert has p >= 0 and beats it.
struct Cand {
  float p;
  int32_t e;
};

FP4_MOE_HD Cand no_cand() { return Cand{-INFINITY, INT_MAX}; }

// A NaN probability (NaN or infinite logits) ranks below every number but above a taken expert, so
// the order stays total: the rounds still pick k distinct valid experts and all lanes agree (the
// CPU's order is undefined then; only safety is promised).
FP4_MOE_HD float rank_key(float p) { return p != p ? -1.0f : p; }
// The top-k order: a before b when a.p > b.p, or equal p and the lower id.
FP4_MOE_HD bool before(const Cand& a, const Cand& b) {
  const float pa = rank_key(a.p), pb = rank_key(b.p);
  return pa > pb || (pa == pb && a.e < b.e);
}
// The one of a, b that comes first (symmetric for distinct ids: both lanes of a shuffle agree).
FP4_MOE_HD Cand first_of(const Cand& a, const Cand& b) { return before(b, a) ? b : a; }

// std::max(a, b) as the CPU's loop computes it.
FP4_MOE_HD float max_of(float a, float b) { return a < b ? b : a; }

// Step 1: p[e] = bf16(logits[e]) for this lane's experts (e = lane, lane + lanes, ...); returns
// their max (-INFINITY when the lane has none).
FP4_MOE_HD float lane_load_max(const float* logits, float* p, int E, int lane, int lanes) {
  float mx = -INFINITY;
  for (int e = lane; e < E; e += lanes) {
    p[e] = round_bf16(logits[e]);
    mx = max_of(mx, p[e]);
  }
  return mx;
}

// Step 2: p[e] = exp(p[e] - mx) for this lane's experts.
FP4_MOE_HD void lane_exp(float* p, int E, int lane, int lanes, float mx) {
  for (int e = lane; e < E; e += lanes) p[e] = exp_f32(p[e] - mx);
}

// Step 3 (one lane, after the others' step 2 is visible): the fp32 sum in ascending e.
FP4_MOE_HD float serial_sum(const float* p, int E) {
  float sum = 0.0f;
  for (int e = 0; e < E; ++e) sum += p[e];
  return sum;
}

// Step 4: p[e] = p[e] / sum for this lane's experts.
FP4_MOE_HD void lane_scale(float* p, int E, int lane, int lanes, float sum) {
  for (int e = lane; e < E; e += lanes) p[e] = p[e] / sum;
}

// Step 5, per round: this lane's first untaken expert (taken ones hold -INFINITY).
FP4_MOE_HD Cand lane_best(const float* p, int E, int lane, int lanes) {
  Cand best = no_cand();
  for (int e = lane; e < E; e += lanes) best = first_of(best, Cand{p[e], e});
  return best;
}

// Step 6 (one lane): w holds the k chosen probabilities in rank order; renormalized in place
// (fp32 sum in rank order) and rounded to bf16.
FP4_MOE_HD void renormalize(float* w, int k) {
  float tsum = 0.0f;
  for (int i = 0; i < k; ++i) tsum += w[i];
  for (int i = 0; i < k; ++i) w[i] = round_bf16(w[i] / tsum);
}

// A token's top-k slots in ascending expert id (the HF eager combine order): order[j] = the slot
// of the j-th smallest id among idx[0..k). Ids of one token are distinct (insertion sort, k <= E).
FP4_MOE_HD void combine_order(const int32_t* idx, int k, int32_t* order) {
  for (int s = 0; s < k; ++s) {
    int j = s;
    while (j > 0 && idx[order[j - 1]] > idx[s]) {
      order[j] = order[j - 1];
      --j;
    }
    order[j] = s;
  }
}

}  // namespace fp4serve::kernels::cuda::moe
