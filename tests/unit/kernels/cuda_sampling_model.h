// A sequential model of the CUDA sampling kernel's selection (src/kernels/cuda/sampling_cuda.cu):
// the same paths, the same scalar rules (sampling_rules.h), the same radix descent (8 bits per pass
// over the order keys, integer masses) and the same id-order walks, one thread instead of a block.
// The unit tests check it against the CPU op's selection (cpu/sampling_selection.cpp) on random
// rows: that the kernel's algorithm draws the CPU's tokens. (That its block-parallel plumbing does
// what this model does is for the GPU tests to show.)
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/cuda/sampling_rules.h"

namespace fp4serve::kernels::cuda::model {

namespace rules = sampling_rules;
using u64 = unsigned long long;
using MemberFn = std::function<bool(int, uint32_t&, u64&)>;
using MassFn = std::function<u64(int)>;

struct Descent {
  uint32_t key;
  u64 above;
};

// sampling_block.cuh radix_descend, one thread.
inline Descent radix_descend(int n, const MemberFn& member, u64 thr) {
  uint32_t prefix = 0, prefix_mask = 0;
  u64 above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    u64 hist[256] = {};
    for (int i = 0; i < n; ++i) {
      uint32_t key;
      u64 m;
      if (member(i, key, m) && m != 0 && (key & prefix_mask) == prefix) hist[(key >> shift) & 255u] += m;
    }
    u64 a = above;
    int sel = 0;
    for (int b = 255; b >= 0; --b) {
      if (a + hist[b] > thr) {
        sel = b;
        break;
      }
      a += hist[b];
    }
    prefix |= static_cast<uint32_t>(sel) << shift;
    prefix_mask |= 255u << shift;
    above = a;
  }
  return {prefix, above};
}

struct Found {
  int index;
  u64 before;
};

// sampling_block.cuh id_order_search: the first index whose inclusive prefix mass exceeds target.
inline Found id_order_search(int n, const MassFn& mass, u64 target) {
  u64 cum = 0;
  for (int i = 0; i < n; ++i) {
    const u64 m = mass(i);
    if (cum + m > target) return {i, cum};
    cum += m;
  }
  return {-1, 0};
}

inline int rank_pick(int n, const MemberFn& member, u64 target, float max_scaled, double scale) {
  const Descent d = radix_descend(n, member, target);
  const u64 w = rules::fixed_mass(rules::exp_f32(rules::key_float(d.key) - max_scaled), scale);
  if (w == 0) return -1;
  const u64 j = (target - d.above) / w;
  return id_order_search(
             n,
             [&](int i) -> u64 {
               uint32_t key;
               u64 m;
               return member(i, key, m) && m != 0 && key == d.key ? 1 : 0;
             },
             j)
      .index;
}

inline u64 nucleus_mass(int n, const MemberFn& member, u64 base, u64 thr, float max_scaled, double scale) {
  const Descent d = radix_descend(n, member, thr - base);
  const u64 w = rules::fixed_mass(rules::exp_f32(rules::key_float(d.key) - max_scaled), scale);
  if (w == 0) return base + d.above;
  const u64 j = (thr - base - d.above) / w;
  return base + d.above + (j + 1) * w;
}

struct Filter {
  float temperature = 1.0f;
  int top_k = 0;  // resolved as the host packs it: 0 < k < valid, else 0
  double top_p = 1.0;
  float min_p = 0.0f;
};

inline int argmax_first(std::span<const float> p) {
  float best = -INFINITY;
  int index = -1;
  for (int i = 0; i < static_cast<int>(p.size()); ++i)
    if (p[static_cast<std::size_t>(i)] > best || (index < 0 && p[static_cast<std::size_t>(i)] == best)) {
      best = p[static_cast<std::size_t>(i)];
      index = i;
    }
  return index < 0 ? 0 : index;
}

// The kernel's select_token for a random row `p` (the processed valid row) and uniform u.
inline int select_random(std::span<const float> p, const Filter& f, double u) {
  const int n = static_cast<int>(p.size());
  float max_raw = -INFINITY;
  for (float x : p) max_raw = x > max_raw ? x : max_raw;
  if (!std::isfinite(max_raw)) return argmax_first(p);
  const float t = f.temperature;
  const float max_scaled = max_raw / t;
  rules::MinP min_p{f.min_p > 0.0f, f.min_p, f.min_p > 0.0f ? std::log(f.min_p) : 0.0f, max_scaled};
  const double scale = std::ldexp(1.0, rules::fixed_mass_shift(n));
  auto at = [&](int i) { return p[static_cast<std::size_t>(i)]; };
  int token = -1;
  if (f.top_k > 0) {
    const Descent kth = radix_descend(
        n,
        [&](int i, uint32_t& key, u64& mass) {
          float x = at(i);
          if (min_p.on && !min_p.keeps(x / t)) x = -INFINITY;
          key = rules::order_key(x);
          mass = 1;
          return true;
        },
        static_cast<u64>(f.top_k - 1));
    const float kth_raw = rules::key_float(kth.key);
    const float band_low = rules::top_k_band_low(kth_raw);
    const float kth_scaled = kth_raw / t;
    const MemberFn member = [&](int i, uint32_t& key, u64& mass) {
      const float x = at(i);
      if (!rules::top_k_keeps(x, t, band_low, kth_scaled, min_p)) return false;
      const float s = x / t;
      key = rules::order_key(s);
      mass = rules::fixed_mass(rules::exp_f32(s - max_scaled), scale);
      return true;
    };
    u64 kept = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t key;
      u64 mass;
      if (member(i, key, mass)) kept += mass;
    }
    if (f.top_p < 1.0) kept = nucleus_mass(n, member, 0, rules::top_p_threshold(f.top_p, kept), max_scaled, scale);
    token = rank_pick(n, member, rules::draw_target(u, kept), max_scaled, scale);
  } else {
    auto candidate = [&](int i, float& s) -> u64 {
      s = at(i) / t;
      if (!min_p.keeps(s)) return 0;
      const float w = rules::exp_f32(s - max_scaled);
      return w > 0.0f ? rules::fixed_mass(w, scale) : 0;
    };
    if (f.top_p < 1.0) {
      std::vector<u64> bucket(rules::kNumBuckets, 0);
      u64 total = 0;
      for (int i = 0; i < n; ++i) {
        float s;
        const u64 w = candidate(i, s);
        total += w;
        if (w) bucket[static_cast<std::size_t>(rules::bucket_of(s, max_scaled))] += w;
      }
      const u64 thr = rules::top_p_threshold(f.top_p, total);
      const Found cut = id_order_search(
          rules::kNumBuckets, [&](int b) { return bucket[static_cast<std::size_t>(b)]; }, thr);
      const int cut_bucket = cut.index < 0 ? rules::kNumBuckets - 1 : cut.index;
      const u64 above = cut.before;
      const MemberFn in_cut = [&](int i, uint32_t& key, u64& mass) {
        float s;
        mass = candidate(i, s);
        if (mass == 0 || rules::bucket_of(s, max_scaled) != cut_bucket) return false;
        key = rules::order_key(s);
        return true;
      };
      const u64 kept = nucleus_mass(n, in_cut, above, thr, max_scaled, scale);
      const u64 target = rules::draw_target(u, kept);
      if (target >= above) {
        token = rank_pick(n, in_cut, target - above, max_scaled, scale);
      } else {
        token = id_order_search(
                    n,
                    [&](int i) -> u64 {
                      float s;
                      const u64 w = candidate(i, s);
                      return w != 0 && rules::bucket_of(s, max_scaled) < cut_bucket ? w : 0;
                    },
                    target)
                    .index;
      }
    } else {
      u64 total = 0;
      for (int i = 0; i < n; ++i) {
        float s;
        total += candidate(i, s);
      }
      token = id_order_search(
                  n,
                  [&](int i) -> u64 {
                    float s;
                    return candidate(i, s);
                  },
                  rules::draw_target(u, total))
                  .index;
    }
  }
  return token < 0 ? argmax_first(p) : token;
}

// The kernel's top-k kept set (before top-p), as a sorted id list.
inline std::vector<int32_t> top_k_set(std::span<const float> p, const Filter& f) {
  const int n = static_cast<int>(p.size());
  float max_raw = -INFINITY;
  for (float x : p) max_raw = x > max_raw ? x : max_raw;
  const float t = f.temperature;
  rules::MinP min_p{f.min_p > 0.0f, f.min_p, f.min_p > 0.0f ? std::log(f.min_p) : 0.0f, max_raw / t};
  const Descent kth = radix_descend(
      n,
      [&](int i, uint32_t& key, u64& mass) {
        float x = p[static_cast<std::size_t>(i)];
        if (min_p.on && !min_p.keeps(x / t)) x = -INFINITY;
        key = rules::order_key(x);
        mass = 1;
        return true;
      },
      static_cast<u64>(f.top_k - 1));
  const float kth_raw = rules::key_float(kth.key);
  std::vector<int32_t> kept;
  for (int i = 0; i < n; ++i)
    if (rules::top_k_keeps(p[static_cast<std::size_t>(i)], t, rules::top_k_band_low(kth_raw), kth_raw / t, min_p))
      kept.push_back(i);
  return kept;
}

// The logprobs kernel's top-N by raw logit (ties to the lower id): the want-th largest key by radix
// select, the entries above it and the first ties in id order, then each placed by the number of
// gathered entries that rank before it. Returns (token, logit) pairs, best first.
inline std::vector<std::pair<int32_t, float>> top_n(std::span<const float> p, int want) {
  const int n = static_cast<int>(p.size());
  const Descent d = radix_descend(
      n,
      [&](int i, uint32_t& key, u64& mass) {
        key = rules::order_key(p[static_cast<std::size_t>(i)]);
        mass = 1;
        return true;
      },
      static_cast<u64>(want - 1));
  const int above = static_cast<int>(d.above);
  std::vector<std::pair<int32_t, float>> gathered(static_cast<std::size_t>(want), {-1, 0.0f});
  int next_above = 0, next_tie = 0;
  for (int i = 0; i < n; ++i) {
    const float x = p[static_cast<std::size_t>(i)];
    const uint32_t key = rules::order_key(x);
    if (key > d.key) {
      gathered[static_cast<std::size_t>(next_above++)] = {i, x};
    } else if (key == d.key) {
      if (above + next_tie < want) gathered[static_cast<std::size_t>(above + next_tie)] = {i, x};
      ++next_tie;
    }
  }
  std::vector<std::pair<int32_t, float>> sorted(static_cast<std::size_t>(want), {-1, 0.0f});
  for (const auto& mine : gathered) {
    int before = 0;
    for (const auto& e : gathered)
      before += (e.second > mine.second || (e.second == mine.second && e.first < mine.first)) ? 1 : 0;
    sorted[static_cast<std::size_t>(before)] = mine;
  }
  return sorted;
}

}  // namespace fp4serve::kernels::cuda::model
