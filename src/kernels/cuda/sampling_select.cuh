// The device half of CUDA sampling (sampling_cuda.cu launches it): what one block does for one
// row. Kept apart from the launches so that the unit tests can run these very functions on the CPU
// under a block emulation (tests/unit/kernels/cuda_block_emulation.h).
//
// The random selection mirrors cpu/sampling_selection.cpp path by path, including the order in
// which its draw walks the candidates (that order decides which token a uniform picks):
//   - top-k: the k-th largest raw logit by radix select (exact: comparisons only), the CPU's kept
//     set, then top-p and the draw in rank order (scaled logit descending, lower id first): in
//     shared memory when the set has at most kCompactCandidates tokens, else by radix descents;
//   - top-p alone: the CPU's buckets of 1/16 nat; the tokens above the cut bucket are walked in id
//     order, those of the cut bucket in rank order;
//   - neither: id order.
// Masses are integers (sampling_rules.h fixed_mass); the rank-order walks are radix descents over
// the scaled logits' order keys, the id-order walks block scans (sampling_block.cuh).
#pragma once

#include <cstdint>

#include "kernels/cuda/sampling_block.cuh"
#include "kernels/cuda/sampling_pack.h"
#include "kernels/cuda/sampling_rules.h"

namespace fp4serve::kernels::cuda::sampling_select {

using namespace sampling_block;
namespace rules = sampling_rules;

struct KernelArgs {
  float* logits;
  const SampleRowParams* rows;
  const SampleEdit* edits;
  const float* biases;
  const uint32_t* masks;
  const int32_t* logprob_ids;
  float* saved;  // the edited tokens' raw values, one per edit
  SampleRowResult* results;
  SampleTopEntry* tops;
  int valid;
  double fixed_scale;
};

// A row read through an optional bitmask: a clear bit reads as -inf.
struct MaskedRow {
  const float* row;
  const uint32_t* mask;
  __device__ float operator()(int i) const {
    const float v = row[i];
    return (mask != nullptr && !((mask[i >> 5] >> (i & 31)) & 1u)) ? -INFINITY : v;
  }
};

// The processors (sampling_pack.h's edits) in the CPU op's order, written into the row; the raw
// values are kept in `saved` for restore_edits.
__device__ inline void apply_edits(const KernelArgs& a, const SampleRowParams& q, float* row) {
  for (int e = threadIdx.x; e < q.edit_count; e += kSampleThreads) {
    const SampleEdit ed = a.edits[q.edit_begin + e];
    const float raw = row[ed.id];
    a.saved[q.edit_begin + e] = raw;
    row[ed.id] = edited_logit(raw, ed, a.biases, q);
  }
}

__device__ inline void restore_edits(const KernelArgs& a, const SampleRowParams& q, float* row) {
  for (int e = threadIdx.x; e < q.edit_count; e += kSampleThreads)
    row[a.edits[q.edit_begin + e].id] = a.saved[q.edit_begin + e];
}

// The token drawn at rank-order mass `target` among `member`'s tokens (member(i, p(i), key, mass) with
// mass = fixed_mass(exp(s - max_scaled)) and key = order_key(s)): the key by radix descent, then
// among the tokens tied on it (equal weights) the right one in id order.
template <class Member>
__device__ int rank_pick(int n, const MaskedRow& p, Member member, u64 target, float max_scaled, double scale,
                         Shared& sh) {
  const Descent d = radix_descend(n, p, member, target, sh);
  const u64 w = rules::fixed_mass(rules::exp_f32(rules::key_float(d.key) - max_scaled), scale);
  if (w == 0) return -1;
  const u64 j = (target - d.above) / w;
  const Found f = id_order_search(
      n,
      [&](int i) -> u64 {
        uint32_t key;
        u64 m;
        return member(i, p(i), key, m) && m != 0 && key == d.key ? 1ull : 0ull;
      },
      j, sh);
  return f.index;
}

// The mass of the rank-order prefix top-p keeps among `member`'s tokens of total mass `total`,
// the mass `base` ranked above them all already counted (the CPU's append_nucleus).
template <class Member>
__device__ u64 nucleus_mass(int n, const MaskedRow& p, Member member, u64 base, u64 thr, float max_scaled, double scale,
                            Shared& sh) {
  const Descent d = radix_descend(n, p, member, thr - base, sh);
  const u64 w = rules::fixed_mass(rules::exp_f32(rules::key_float(d.key) - max_scaled), scale);
  if (w == 0) return base + d.above;
  const u64 j = (thr - base - d.above) / w;
  return base + d.above + (j + 1) * w;
}

// What every random path knows about its row once its maximum is finite.
struct RandomRow {
  int n;
  float t;
  float max_scaled;
  rules::MinP min_p;
  double scale;
  double uniform;
  double top_p;
};

// Top-k's kept set of `count` <= kCompactCandidates tokens, finished in shared memory: gathered,
// placed in rank order (scaled logit descending, lower id first: each token counts those ranked
// before it), then top-p and the draw walk the masses in that order. The same integer masses and
// order as the radix path, so the same token.
__device__ inline int select_top_k_compact(const RandomRow& r, int count, float band_low, float kth_scaled,
                                           const MaskedRow& p, Shared& sh) {
  if (threadIdx.x == 0) sh.compact_count = 0;
  __syncthreads();
  for_each_value(r.n, p, [&](int i, float x) {
    if (!rules::top_k_keeps(x, r.t, band_low, kth_scaled, r.min_p)) return;
    const int slot = atomicAdd(&sh.compact_count, 1);
    sh.compact.key[slot] = rules::order_key(x / r.t);
    sh.compact.id[slot] = i;
  });
  __syncthreads();
  for (int c = threadIdx.x; c < count; c += kSampleThreads) {
    const uint32_t key = sh.compact.key[c];
    const int id = sh.compact.id[c];
    int pos = 0;
    for (int o = 0; o < count; ++o)
      pos += (sh.compact.key[o] > key || (sh.compact.key[o] == key && sh.compact.id[o] < id)) ? 1 : 0;
    sh.compact.sorted_id[pos] = id;
    sh.compact.mass[pos] = rules::fixed_mass(rules::exp_f32(rules::key_float(key) - r.max_scaled), r.scale);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    u64 kept = 0;
    for (int c = 0; c < count; ++c) kept += sh.compact.mass[c];
    if (r.top_p < 1.0) {
      const u64 thr = rules::top_p_threshold(r.top_p, kept);
      u64 cum = 0;
      for (int c = 0; c < count; ++c) {
        cum += sh.compact.mass[c];
        if (cum > thr) break;
      }
      kept = cum;
    }
    const u64 target = rules::draw_target(r.uniform, kept);
    int token = -1;
    u64 cum = 0;
    for (int c = 0; c < count; ++c) {
      cum += sh.compact.mass[c];
      if (cum > target) {
        token = sh.compact.sorted_id[c];
        break;
      }
    }
    sh.bcast_i = token;
  }
  __syncthreads();
  const int token = sh.bcast_i;
  __syncthreads();
  return token;
}

// Top-k (then top-p): the CPU's kept set, walked in rank order.
__device__ inline int select_top_k(const RandomRow& r, int top_k, const MaskedRow& p, Shared& sh) {
  const int n = r.n;
  const float t = r.t;
  // The k-th largest raw logit, min_p's drops counting as -inf.
  const Descent kth = radix_descend(
      n, p,
      [&](int, float x, uint32_t& key, u64& mass) {
        if (r.min_p.on && !r.min_p.keeps(x / t)) x = -INFINITY;
        key = rules::order_key(x);
        mass = 1;
        return true;
      },
      static_cast<u64>(top_k - 1), sh);
  const float kth_raw = rules::key_float(kth.key);
  const float band_low = rules::top_k_band_low(kth_raw);
  const float kth_scaled = kth_raw / t;
  u64 local_count = 0;
  for_each_value(n, p,
                 [&](int, float x) { local_count += rules::top_k_keeps(x, t, band_low, kth_scaled, r.min_p) ? 1 : 0; });
  const u64 count = block_sum(local_count, sh);
  if (count <= static_cast<u64>(kCompactCandidates))
    return select_top_k_compact(r, static_cast<int>(count), band_low, kth_scaled, p, sh);
  auto member = [&](int, float x, uint32_t& key, u64& mass) {
    if (!rules::top_k_keeps(x, t, band_low, kth_scaled, r.min_p)) return false;
    const float s = x / t;
    key = rules::order_key(s);
    mass = rules::fixed_mass(rules::exp_f32(s - r.max_scaled), r.scale);
    return true;
  };
  u64 local = 0;
  for_each_value(n, p, [&](int i, float x) {
    uint32_t key;
    u64 mass;
    if (member(i, x, key, mass)) local += mass;
  });
  u64 kept = block_sum(local, sh);
  if (r.top_p < 1.0)
    kept = nucleus_mass(n, p, member, 0, rules::top_p_threshold(r.top_p, kept), r.max_scaled, r.scale, sh);
  return rank_pick(n, p, member, rules::draw_target(r.uniform, kept), r.max_scaled, r.scale, sh);
}

// A candidate's mass, from its processed logit x, when its bucket is in [lo, hi] (0 otherwise, or
// when min_p drops it or its weight is 0: not a CPU candidate), with its scaled logit and bucket. exp() is the costly
// part (glibc's algorithm in double: fp64 is slow on consumer GPUs), so it is left for last.
__device__ __forceinline__ u64 candidate_mass(const RandomRow& r, float x, int lo, int hi, float& s, int& bucket) {
  s = x / r.t;
  bucket = rules::bucket_of(s, r.max_scaled);
  if (s == -INFINITY || bucket < lo || bucket > hi || !r.min_p.keeps(s)) return 0;
  const float w = rules::exp_f32(s - r.max_scaled);
  return w > 0.0f ? rules::fixed_mass(w, r.scale) : 0;
}

// Top-p alone, through the CPU's buckets: the buckets above the cut walked in id order, the cut
// bucket in rank order.
__device__ inline int select_top_p(const RandomRow& r, const MaskedRow& p, Shared& sh) {
  const int n = r.n;
  for (int b = threadIdx.x; b < rules::kNumBuckets; b += kSampleThreads) sh.bucket[b] = 0;
  __syncthreads();
  u64 local = 0;
  int run_bucket = -1;  // a run of one bucket's tokens is added with one atomic (radix_descend's reason)
  u64 run_mass = 0;
  for_each_value(n, p, [&](int, float x) {
    float s;
    int bucket;
    const u64 w = candidate_mass(r, x, 0, rules::kNumBuckets - 1, s, bucket);
    if (w == 0) return;
    local += w;
    if (bucket != run_bucket) {
      if (run_mass != 0) atomicAdd(&sh.bucket[run_bucket], run_mass);
      run_bucket = bucket;
      run_mass = 0;
    }
    run_mass += w;
  });
  if (run_mass != 0) atomicAdd(&sh.bucket[run_bucket], run_mass);
  const u64 total = block_sum(local, sh);
  const u64 thr = rules::top_p_threshold(r.top_p, total);
  const Found cut = id_order_search(
      rules::kNumBuckets, [&](int b) { return sh.bucket[b]; }, thr, sh);
  const int cut_bucket = cut.index < 0 ? rules::kNumBuckets - 1 : cut.index;
  const u64 above = cut.before;
  auto in_cut = [&](int, float x, uint32_t& key, u64& mass) {
    float s;
    int bucket;
    mass = candidate_mass(r, x, cut_bucket, cut_bucket, s, bucket);
    if (mass == 0) return false;
    key = rules::order_key(s);
    return true;
  };
  const u64 kept = nucleus_mass(n, p, in_cut, above, thr, r.max_scaled, r.scale, sh);
  const u64 target = rules::draw_target(r.uniform, kept);
  if (target >= above) return rank_pick(n, p, in_cut, target - above, r.max_scaled, r.scale, sh);
  return id_order_search(
             n,
             [&](int i) -> u64 {
               float s;
               int bucket;
               return candidate_mass(r, p(i), 0, cut_bucket - 1, s, bucket);
             },
             target, sh)
      .index;
}

// Neither top-k nor top-p: every candidate, walked in id order.
__device__ inline int select_plain(const RandomRow& r, const MaskedRow& p, Shared& sh) {
  auto mass_of = [&](float x) -> u64 {
    float s;
    int bucket;
    return candidate_mass(r, x, 0, rules::kNumBuckets - 1, s, bucket);
  };
  auto mass = [&](int i) -> u64 { return mass_of(p(i)); };
  u64 local = 0;
  for_each_value(r.n, p, [&](int, float x) { local += mass_of(x); });
  const u64 total = block_sum(local, sh);
  return id_order_search(r.n, mass, rules::draw_target(r.uniform, total), sh).index;
}

// Which kernel instantiation samples a row: each keeps its code small (one path per kernel keeps
// ptxas within registers).
enum SelectPath : int { kPathGreedyOrPlain = 0, kPathTopK = 1, kPathTopP = 2 };

__device__ __forceinline__ int path_of(const SampleRowParams& q) {
  if (q.mode == kSampleGreedy) return kPathGreedyOrPlain;
  if (q.top_k > 0) return kPathTopK;
  return q.top_p < 1.0 ? kPathTopP : kPathGreedyOrPlain;
}

template <int Path>
__device__ int select_token(const KernelArgs& a, const SampleRowParams& q, const MaskedRow& p, Shared& sh) {
  const int n = a.valid;
  if (Path == kPathGreedyOrPlain && q.mode == kSampleGreedy) return block_argmax_first(n, p, sh);
  float m = -INFINITY;
  for_each_value(n, p, [&](int, float x) { m = x > m ? x : m; });
  const float max_raw = block_max(m, sh);
  // Degenerate row (every token -inf, or a +inf): the first maximum, as the CPU op.
  if (!isfinite(max_raw)) return block_argmax_first(n, p, sh);
  const float max_scaled = max_raw / q.temperature;
  const RandomRow r{n,
                    q.temperature,
                    max_scaled,
                    rules::MinP{q.min_p > 0.0f, q.min_p, q.log_min_p, max_scaled},
                    a.fixed_scale,
                    q.uniform,
                    q.top_p};
  int token;
  if constexpr (Path == kPathTopK)
    token = select_top_k(r, q.top_k, p, sh);
  else if constexpr (Path == kPathTopP)
    token = select_top_p(r, p, sh);
  else
    token = select_plain(r, p, sh);
  // Not reachable with a finite maximum (its token always holds mass); the first maximum then.
  if (token < 0) token = block_argmax_first(n, p, sh);
  return token;
}

// Raw logprobs of the grammar-masked row (cpu/sampling_logprobs.cpp): log-sum-exp with float terms
// summed in double, the token's logprob and rank, then the top-N or the named ids.
__device__ inline void logprobs(const KernelArgs& a, const SampleRowParams& q, const float* row, int token,
                                Shared& sh) {
  const int n = a.valid;
  const MaskedRow p{row, q.logprob_mask >= 0 ? a.masks + q.logprob_mask : nullptr};
  float m = -INFINITY;
  for_each_value(n, p, [&](int, float x) { m = x > m ? x : m; });
  const float max = block_max(m, sh);
  double lse = static_cast<double>(max);
  if (isfinite(max)) {
    double sum = 0.0;
    for_each_value(n, p, [&](int, float x) {
      if (x != -INFINITY) sum += static_cast<double>(rules::exp_f32(x - max));  // exp(-inf) adds 0
    });
    lse = static_cast<double>(max) + log(block_sum(sum, sh));
  }
  auto logprob = [lse](float x) { return static_cast<float>(static_cast<double>(x) - lse); };
  const float lp = logprob(p(token));
  u64 count = 0;
  for_each_value(n, p, [&](int, float x) { count += logprob(x) >= lp ? 1 : 0; });
  const u64 rank = block_sum(count, sh);
  if (threadIdx.x == 0) {
    a.results[blockIdx.x].logprob = lp;
    a.results[blockIdx.x].rank = static_cast<int64_t>(rank);
  }
  SampleTopEntry* out = a.tops + q.out_top;
  if (q.logprobs == kLogprobsIds) {
    for (int k = threadIdx.x; k < q.num_top; k += kSampleThreads) {
      const int id = a.logprob_ids[q.ids_begin + k];
      out[k] = SampleTopEntry{id, logprob(id < n ? p(id) : row[id])};
    }
    return;
  }
  const int want = q.num_top;
  if (want == 0) return;
  // The want-th largest (logit, lower id first): the want-th largest logit by radix select, every
  // token above it, then the lowest ids among those equal to it.
  auto by_logit = [&](int, float x, uint32_t& key, u64& mass) {
    key = rules::order_key(x);
    mass = 1;
    return true;
  };
  const Descent d = radix_descend(n, p, by_logit, static_cast<u64>(want - 1), sh);
  const int above = static_cast<int>(d.above);
  const int per = (n + kSampleThreads - 1) / kSampleThreads;
  const int begin = min(n, static_cast<int>(threadIdx.x) * per), end = min(n, begin + per);
  u64 above_here = 0, ties_here = 0;
#pragma unroll 8
  for (int i = begin; i < end; ++i) {
    const uint32_t key = rules::order_key(p(i));
    above_here += key > d.key ? 1 : 0;
    ties_here += key == d.key ? 1 : 0;
  }
  // Both counts scanned in one pass: above in the high 32 bits, ties in the low (each < 2^31).
  u64 slot;
  ScanU(sh.temp.scan).ExclusiveSum((above_here << 32) | ties_here, slot);
  int next_above = static_cast<int>(slot >> 32), next_tie = static_cast<int>(slot & 0xffffffffull);
  // Entries go straight to their place: a token's position is the number of chosen entries that
  // rank before it, counted once all are known; first gather them unsorted at out[0..want).
  for (int i = begin; i < end; ++i) {
    const float x = p(i);
    const uint32_t key = rules::order_key(x);
    if (key > d.key) {
      out[next_above++] = SampleTopEntry{i, x};
    } else if (key == d.key) {
      if (above + next_tie < want) out[above + next_tie] = SampleTopEntry{i, x};
      ++next_tie;
    }
  }
  __syncthreads();
  // Rank each gathered entry among the others (higher logit first, lower id among equals); keep
  // the logit per thread, then write the sorted order back with the logprobs.
  constexpr int kPerThread = (kMaxDeviceTop + kSampleThreads - 1) / kSampleThreads;
  SampleTopEntry mine[kPerThread];
  int pos[kPerThread];
#pragma unroll
  for (int r = 0; r < kPerThread; ++r) {
    const int k = static_cast<int>(threadIdx.x) + r * kSampleThreads;
    pos[r] = -1;
    if (k >= want) continue;
    mine[r] = out[k];
    int before = 0;
    for (int o = 0; o < want; ++o) {
      const SampleTopEntry e = out[o];
      before += (e.logprob > mine[r].logprob || (e.logprob == mine[r].logprob && e.token < mine[r].token)) ? 1 : 0;
    }
    pos[r] = before;
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < kPerThread; ++r)
    if (pos[r] >= 0) out[pos[r]] = SampleTopEntry{mine[r].token, logprob(mine[r].logprob)};
}

// Block blockIdx.x's row, when it takes path `Path`: edits in, selection, edits out, the token
// into the row's result.
template <int Path>
__device__ void select_row(const KernelArgs& a, Shared& sh) {
  const SampleRowParams q = a.rows[blockIdx.x];
  if (path_of(q) != Path) return;
  float* row = a.logits + q.logits_offset;
  apply_edits(a, q, row);
  __syncthreads();
  const MaskedRow processed{row, q.sample_mask >= 0 ? a.masks + q.sample_mask : nullptr};
  const int token = select_token<Path>(a, q, processed, sh);
  __syncthreads();
  restore_edits(a, q, row);
  if (threadIdx.x == 0) a.results[blockIdx.x] = SampleRowResult{token, 0.0f, 0};
}

// Block blockIdx.x's logprobs, when its row asks for them on the device (after select_row).
__device__ inline void logprobs_row(const KernelArgs& a, Shared& sh) {
  const SampleRowParams q = a.rows[blockIdx.x];
  if (q.logprobs != kLogprobsTop && q.logprobs != kLogprobsIds) return;
  logprobs(a, q, a.logits + q.logits_offset, a.results[blockIdx.x].token, sh);
}

}  // namespace fp4serve::kernels::cuda::sampling_select
