#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/activation.h"
#include "kernels/bf16.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/thread_scratch.h"
#include "kernels/cpu/linear_cpu.h"
#include "kernels/moe.h"
#include "kernels/cpu/moe_cpu.h"

namespace fp4serve::kernels {
namespace {

void check_weights(const MoeWeights& w) {
  const int64_t E = static_cast<int64_t>(w.experts.size());
  if (w.router.n != E) throw std::invalid_argument("moe: router has " + std::to_string(w.router.n) +
                                                   " rows but " + std::to_string(E) + " experts were given");
  if (w.top_k <= 0 || w.top_k > E) throw std::invalid_argument("moe: top_k out of range");
  const int64_t H = w.router.k;
  for (int64_t e = 0; e < E; ++e) {
    const ExpertWeights& x = w.experts[e];
    if (x.gate.k != H || x.up.k != H || x.gate.n != x.up.n || x.down.k != x.gate.n || x.down.n != H)
      throw std::invalid_argument("moe: expert " + std::to_string(e) + " has inconsistent gate/up/down shapes");
  }
  if (w.has_shared && (w.shared.gate.k != H || w.shared.down.n != H || w.shared_gate.n != 1 || w.shared_gate.k != H))
    throw std::invalid_argument("moe: shared expert shapes do not match hidden size");
}

// In place on g (becomes h): g, u rows of I values; h = bf16(bf16(silu(bf16(g))) * bf16(u)).
// Elementwise, split over the threads.
void swiglu_bf16(float* g, const float* u, int64_t n) {
  cpu::parallel_for(n, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) g[i] = round_bf16(round_bf16(silu(round_bf16(g[i]))) * round_bf16(u[i]));
  });
}

// The block's per-step buffers, reused across calls by the calling thread (thread_scratch.h): at
// prefill they are tens of MB, and fresh vectors were fresh mmaps that the kernel page-faulted and
// zeroed at every layer. Contents are not kept: every user writes before reading.
float* scratch(cpu::Scratch slot, int64_t n) { return cpu::scratch<float>(slot, static_cast<size_t>(n)); }
using cpu::Scratch;
constexpr Scratch kXf = Scratch::kMoeXf, kLogits = Scratch::kMoeLogits, kRw = Scratch::kMoeRw, kXg = Scratch::kMoeXg,
                  kG = Scratch::kMoeG, kU = Scratch::kMoeU, kSg = Scratch::kMoeSg, kSu = Scratch::kMoeSu,
                  kSgate = Scratch::kMoeSgate, kD = Scratch::kMoeD, kSd = Scratch::kMoeSd;

}  // namespace

namespace {

// group_by_expert into caller-provided arrays: offsets [E + 1], token and slot [T * top_k].
void group_into(const int32_t* idx, int64_t T, int top_k, int E, int32_t* offsets, int32_t* token, int32_t* slot) {
  std::fill(offsets, offsets + E + 1, 0);
  for (int64_t i = 0; i < T * top_k; ++i) {
    if (idx[i] < 0 || idx[i] >= E) throw std::out_of_range("moe: expert id " + std::to_string(idx[i]) + " out of range");
    ++offsets[idx[i] + 1];
  }
  for (int e = 0; e < E; ++e) offsets[e + 1] += offsets[e];
  int32_t* fill = cpu::scratch<int32_t>(cpu::Scratch::kMoeFill, static_cast<size_t>(E));
  std::copy(offsets, offsets + E, fill);
  for (int64_t t = 0; t < T; ++t) {
    for (int s = 0; s < top_k; ++s) {
      const int32_t pos = fill[idx[t * top_k + s]]++;
      token[pos] = static_cast<int32_t>(t);
      slot[pos] = s;
    }
  }
}

}  // namespace

void moe_route(const float* logits, int64_t T, int E, int top_k, int32_t* idx, float* weights) {
  float* p = cpu::scratch<float>(cpu::Scratch::kMoeProbs, static_cast<size_t>(E));
  int32_t* order = cpu::scratch<int32_t>(cpu::Scratch::kMoeOrder, static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    float mx = -INFINITY;
    for (int e = 0; e < E; ++e) mx = std::max(mx, l[e]);
    float sum = 0.0f;
    for (int e = 0; e < E; ++e) {
      p[e] = std::exp(l[e] - mx);
      sum += p[e];
    }
    for (int e = 0; e < E; ++e) p[e] = p[e] / sum;
    for (int e = 0; e < E; ++e) order[e] = e;
    std::partial_sort(order, order + top_k, order + E,
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float tsum = 0.0f;
    for (int i = 0; i < top_k; ++i) tsum += p[order[i]];
    for (int i = 0; i < top_k; ++i) {
      idx[t * top_k + i] = order[i];
      weights[t * top_k + i] = round_bf16(p[order[i]] / tsum);
    }
  }
}

ExpertGroups group_by_expert(const int32_t* idx, int64_t T, int top_k, int E) {
  ExpertGroups g;
  g.offsets.resize(static_cast<size_t>(E) + 1);
  g.token.resize(static_cast<size_t>(T * top_k));
  g.slot.resize(static_cast<size_t>(T * top_k));
  group_into(idx, T, top_k, E, g.offsets.data(), g.token.data(), g.slot.data());
  return g;
}

void moe_block(const uint16_t* x, int64_t T, const MoeWeights& w, uint16_t* out, Isa isa, MoeCombine combine) {
  check_weights(w);
  if (T == 0) return;
  const int E = static_cast<int>(w.experts.size());
  const int K = w.top_k;
  const int64_t H = w.router.k;
  const int64_t I = w.experts[0].gate.n;
  const int64_t R = T * K;  // routed rows

  float* xf = scratch(kXf, T * H);
  bf16_to_f32(x, xf, T * H);

  // Router.
  float* logits = scratch(kLogits, T * E);
  linear(xf, T, w.router, logits, isa);
  round_bf16_inplace(logits, T * E);
  int32_t* idx = cpu::scratch<int32_t>(cpu::Scratch::kMoeIdx, static_cast<size_t>(R));
  float* rw = scratch(kRw, R);
  moe_route(logits, T, E, K, idx, rw);
  struct Groups {
    int32_t* offsets;
    int32_t* token;
    int32_t* slot;
  } groups{cpu::scratch<int32_t>(cpu::Scratch::kMoeOffsets, static_cast<size_t>(E) + 1),
           cpu::scratch<int32_t>(cpu::Scratch::kMoeToken, static_cast<size_t>(R)),
           cpu::scratch<int32_t>(cpu::Scratch::kMoeSlot, static_cast<size_t>(R))};
  group_into(idx, T, K, E, groups.offsets, groups.token, groups.slot);

  // Grouped activations (expert order), then gate/up for all experts and the shared expert at once.
  float* xg = scratch(kXg, R * H);
  cpu::parallel_for(R, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) std::copy_n(xf + groups.token[r] * H, H, xg + r * H);
  });
  float* g = scratch(kG, R * I);
  float* u = scratch(kU, R * I);
  const int64_t Is = w.has_shared ? w.shared.gate.n : 0;
  float* sg = scratch(kSg, T * Is);
  float* su = scratch(kSu, T * Is);
  float* sgate = scratch(kSgate, T);
  // At most two jobs per expert plus three shared ones.
  LinearJob* jobs = cpu::scratch<LinearJob>(cpu::Scratch::kMoeJobs, 2 * static_cast<size_t>(E) + 3);
  size_t njobs = 0;
  for (int e = 0; e < E; ++e) {
    const int64_t r0 = groups.offsets[e], n = groups.offsets[e + 1] - r0;
    if (n == 0) continue;
    jobs[njobs++] = {xg + r0 * H, n, H, w.experts[e].gate, g + r0 * I, I};
    jobs[njobs++] = {xg + r0 * H, n, H, w.experts[e].up, u + r0 * I, I};
  }
  if (w.has_shared) {
    jobs[njobs++] = {xf, T, H, w.shared.gate, sg, Is};
    jobs[njobs++] = {xf, T, H, w.shared.up, su, Is};
    jobs[njobs++] = {xf, T, H, w.shared_gate, sgate, 1};
  }
  linear_batch(std::span<const LinearJob>(jobs, njobs), isa);
  swiglu_bf16(g, u, R * I);
  if (w.has_shared) swiglu_bf16(sg, su, T * Is);

  // Down projections.
  float* d = scratch(kD, R * H);
  float* sd = w.has_shared ? scratch(kSd, T * H) : nullptr;
  njobs = 0;
  for (int e = 0; e < E; ++e) {
    const int64_t r0 = groups.offsets[e], n = groups.offsets[e + 1] - r0;
    if (n == 0) continue;
    jobs[njobs++] = {g + r0 * I, n, I, w.experts[e].down, d + r0 * H, H};
  }
  if (w.has_shared) jobs[njobs++] = {sg, T, Is, w.shared.down, sd, H};
  linear_batch(std::span<const LinearJob>(jobs, njobs), isa);

  // Where each (token, slot) landed in the grouped order; combine in ascending expert id (HF's
  // loop over expert_hit) with a bf16 add per expert, then add the gated shared expert.
  int32_t* row_of = cpu::scratch<int32_t>(cpu::Scratch::kMoeRowOf, static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) row_of[groups.token[r] * K + groups.slot[r]] = static_cast<int32_t>(r);
  cpu::parallel_for(T, 4, [&](int64_t t0, int64_t t1) {
    int* slots = cpu::scratch<int>(cpu::Scratch::kMoeSlots, static_cast<size_t>(K));
    float* acc = cpu::scratch<float>(cpu::Scratch::kMoeAcc, static_cast<size_t>(H));
    for (int64_t t = t0; t < t1; ++t) {
      for (int s = 0; s < K; ++s) slots[s] = s;
      if (combine == MoeCombine::kHfEager)
        std::sort(slots, slots + K, [&](int a, int b) { return idx[t * K + a] < idx[t * K + b]; });
      std::fill(acc, acc + H, 0.0f);
      for (int k = 0; k < K; ++k) {
        const int s = slots[k];
        const float* dr = d + static_cast<int64_t>(row_of[t * K + s]) * H;
        const float wt = rw[t * K + s];
        if (combine == MoeCombine::kFp32Sum) {
          for (int64_t i = 0; i < H; ++i) acc[i] = acc[i] + round_bf16(round_bf16(dr[i]) * wt);
        } else {
          for (int64_t i = 0; i < H; ++i) acc[i] = round_bf16(acc[i] + round_bf16(round_bf16(dr[i]) * wt));
        }
      }
      if (combine == MoeCombine::kFp32Sum) round_bf16_inplace(acc, H);
      if (w.has_shared) {
        const float gate = round_bf16(sigmoid(round_bf16(sgate[t])));
        for (int64_t i = 0; i < H; ++i) acc[i] = round_bf16(acc[i] + round_bf16(gate * round_bf16(sd[t * H + i])));
      }
      f32_to_bf16(acc, out + t * H, H);
    }
  });
}

}  // namespace fp4serve::kernels
