#include "kernels/cpu/sampling_selection.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

namespace fp4serve::kernels::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Tokens are scanned in blocks of 64 whose maxima are known, so the top-k passes skip a block
// whose best token cannot enter: most of the vocabulary is read once, by the vectorised max.
constexpr std::size_t kBlock = 64;

// Max of p[0..n) with 8 independent accumulators (no loop-carried dependency: vectorised).
float span_max(const float* p, std::size_t n) {
  float acc[8];
  std::fill(std::begin(acc), std::end(acc), kNegInf);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] = p[i + j] > acc[j] ? p[i + j] : acc[j];
  }
  float m = kNegInf;
  for (float a : acc) m = a > m ? a : m;
  for (; i < n; ++i) m = p[i] > m ? p[i] : m;
  return m;
}

// The row's max, and each block's into `block_max`.
float block_maxima(std::span<const float> row, std::vector<float>& block_max) {
  const std::size_t blocks = (row.size() + kBlock - 1) / kBlock;
  block_max.resize(blocks);
  float m = kNegInf;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kBlock;
    block_max[b] = span_max(row.data() + begin, std::min(kBlock, row.size() - begin));
    m = block_max[b] > m ? block_max[b] : m;
  }
  return m;
}

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.scaled > b.scaled || (a.scaled == b.scaled && a.token < b.token);
}

// min_p as vLLM's MinPLogitsProcessor: drop a token when softmax(p) < min_p * max softmax, i.e.
// exp(scaled - max_scaled) < min_p. exp() is only evaluated near the boundary.
class MinPFilter {
 public:
  MinPFilter(double min_p, float max_scaled)
      : on_(min_p > 0.0),
        min_p_(static_cast<float>(min_p)),  // vLLM holds min_p in a float32 tensor
        log_min_p_(on_ ? std::log(min_p_) : kNegInf),
        max_scaled_(max_scaled) {}
  bool on() const { return on_; }
  bool keeps(float scaled) const {
    if (!on_) return true;
    const float d = scaled - max_scaled_;
    if (d > log_min_p_ + 0.01f) return true;
    if (d < log_min_p_ - 0.01f) return false;
    return std::exp(d) >= min_p_;
  }

 private:
  bool on_;
  float min_p_;
  float log_min_p_;
  float max_scaled_;
};

// Top-p over candidates sorted best first, `mass` already ranked above them: keep a candidate
// while the weight ranked above it is < target = top_p * (total weight) (vLLM: a token whose
// ascending cumulative probability is <= 1 - top_p is dropped; the top token never is).
void append_nucleus(const std::vector<Candidate>& sorted, double mass, double target,
                    std::vector<Candidate>& kept) {
  for (std::size_t r = 0; r < sorted.size(); ++r) {
    if (mass >= target && !kept.empty()) return;
    kept.push_back(sorted[r]);
    mass += sorted[r].weight;
  }
}

// Top-p without top-k, without sorting the vocabulary: tokens are bucketed by how far their
// scaled logit is below the max (1/16 nat per bucket, monotonic in the logit), the bucket where
// the ranked mass crosses the target is found from per-bucket sums, every token of the buckets
// above it is kept, and only that one bucket is sorted to place the cut exactly.
constexpr float kBucketsPerNat = 16.0f;
constexpr std::size_t kNumBuckets = 104 * 16 + 2;  // exp(-104) is below float's smallest weight

std::size_t bucket_of(float scaled, float max_scaled) {
  const float d = (max_scaled - scaled) * kBucketsPerNat;
  return d < static_cast<float>(kNumBuckets - 1) ? static_cast<std::size_t>(d) : kNumBuckets - 1;
}

void nucleus_by_buckets(std::span<const float> row, float t, float max_scaled,
                        const MinPFilter& min_p, double top_p, SelectionScratch& scratch) {
  std::vector<Candidate>& all = scratch.all;
  std::vector<double>& mass = scratch.bucket_mass;
  all.clear();
  mass.assign(kNumBuckets, 0.0);
  double total = 0.0;
  for (std::size_t i = 0; i < row.size(); ++i) {
    const float s = row[i] / t;
    if (!min_p.keeps(s)) continue;
    const float w = std::exp(s - max_scaled);
    if (!(w > 0.0f)) continue;
    all.push_back({static_cast<int32_t>(i), s, w});
    mass[bucket_of(s, max_scaled)] += w;
    total += w;
  }
  const double target = top_p * total;
  std::size_t cut = 0;
  double above = 0.0;  // mass of the buckets before `cut`
  for (; cut + 1 < kNumBuckets; ++cut) {
    if (above + mass[cut] >= target) break;
    above += mass[cut];
  }
  std::vector<Candidate>& kept = scratch.kept;
  std::vector<Candidate>& boundary = scratch.boundary;
  boundary.clear();
  for (const Candidate& c : all) {
    const std::size_t b = bucket_of(c.scaled, max_scaled);
    if (b < cut) {
      kept.push_back(c);
    } else if (b == cut) {
      boundary.push_back(c);
    }
  }
  std::sort(boundary.begin(), boundary.end(), ranks_before);
  append_nucleus(boundary, above, target, kept);
}

}  // namespace

void SelectionScratch::reserve(std::size_t vocab) {
  kept.reserve(vocab);
  all.reserve(vocab);
  boundary.reserve(vocab);
  bucket_mass.reserve(kNumBuckets);
  block_max.reserve((vocab + kBlock - 1) / kBlock);
  heap.reserve(vocab);
}

float row_max(std::span<const float> row) { return span_max(row.data(), row.size()); }

int32_t argmax_first(std::span<const float> row) {
  // One vectorised pass over blocks: the first block holding the max (strictly greater than all
  // earlier blocks), then the first max inside it.
  float best = kNegInf;
  std::size_t best_block = 0;
  for (std::size_t begin = 0; begin < row.size(); begin += kBlock) {
    const float m = span_max(row.data() + begin, std::min(kBlock, row.size() - begin));
    if (m > best) {
      best = m;
      best_block = begin;
    }
  }
  const std::size_t end = std::min(row.size(), best_block + kBlock);
  for (std::size_t i = best_block; i < end; ++i) {
    if (row[i] == best) return static_cast<int32_t>(i);
  }
  return 0;  // empty row, all -inf, or NaNs only
}

std::span<const Candidate> select_candidates(std::span<const float> row, const RandomFilter& filter,
                                             SelectionScratch& scratch) {
  const std::size_t vocab = row.size();
  const float t = filter.temperature;
  std::vector<Candidate>& kept = scratch.kept;
  kept.clear();
  std::vector<float>& block_max = scratch.block_max;
  const float max_raw = block_maxima(row, block_max);
  if (!std::isfinite(max_raw)) {
    // Degenerate row (every token -inf, or a +inf logit): vLLM's softmax would be NaN here. We
    // return the first maximum rather than an arbitrary token.
    if (!row.empty()) kept.push_back({argmax_first(row), max_raw, 1.0f});
    return kept;
  }
  // Division by a positive float is monotonic, so the max of the scaled row is the scaled max.
  const float max_scaled = max_raw / t;
  const MinPFilter min_p(filter.min_p, max_scaled);
  const bool top_k_on = filter.top_k > 0 && filter.top_k < static_cast<int64_t>(vocab);
  const bool top_p_on = filter.top_p < 1.0;

  if (top_k_on) {
    // k-th largest raw logit, min_p's drops counting as -inf (they are -inf in vLLM's tensor).
    const auto k = static_cast<std::size_t>(filter.top_k);
    std::vector<float>& heap = scratch.heap;  // min-heap of the k largest so far
    heap.clear();
    for (std::size_t b = 0; b < block_max.size(); ++b) {
      if (heap.size() == k && !(block_max[b] > heap.front())) continue;
      const std::size_t end = std::min(vocab, (b + 1) * kBlock);
      for (std::size_t i = b * kBlock; i < end; ++i) {
        float r = row[i];
        if (min_p.on() && !min_p.keeps(r / t)) r = kNegInf;
        if (heap.size() < k) {
          heap.push_back(r);
          std::push_heap(heap.begin(), heap.end(), std::greater<float>());
        } else if (r > heap.front()) {
          std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
          heap.back() = r;
          std::push_heap(heap.begin(), heap.end(), std::greater<float>());
        }
      }
    }
    const float kth_raw = heap.front();
    const float kth_scaled = kth_raw / t;
    // vLLM compares the scaled logits; scaling can merge a raw value just below the k-th into a
    // tie with it, so a thin band below is re-checked in scaled space.
    const float band_low = kth_raw - (std::fabs(kth_raw) * 0x1p-20f + 1e-30f);
    for (std::size_t b = 0; b < block_max.size(); ++b) {
      if (!(block_max[b] >= band_low)) continue;
      const std::size_t end = std::min(vocab, (b + 1) * kBlock);
      for (std::size_t i = b * kBlock; i < end; ++i) {
        if (!(row[i] >= band_low)) continue;
        const float s = row[i] / t;
        if (s < kth_scaled || s == kNegInf || !min_p.keeps(s)) continue;
        kept.push_back({static_cast<int32_t>(i), s, std::exp(s - max_scaled)});
      }
    }
    std::sort(kept.begin(), kept.end(), ranks_before);
    if (top_p_on) {
      double total = 0.0;
      for (const Candidate& c : kept) total += c.weight;
      std::vector<Candidate>& sorted = scratch.boundary;
      sorted.swap(kept);
      kept.clear();
      append_nucleus(sorted, 0.0, filter.top_p * total, kept);
    }
    return kept;
  }

  if (top_p_on) {
    nucleus_by_buckets(row, t, max_scaled, min_p, filter.top_p, scratch);
    return kept;
  }

  for (std::size_t i = 0; i < vocab; ++i) {
    const float s = row[i] / t;
    if (!min_p.keeps(s)) continue;
    const float w = std::exp(s - max_scaled);
    if (w > 0.0f) kept.push_back({static_cast<int32_t>(i), s, w});
  }
  return kept;
}

int32_t draw_candidate(std::span<const Candidate> candidates, double u) {
  double total = 0.0;
  for (const Candidate& c : candidates) total += c.weight;
  const double target = u * total;
  double cum = 0.0;
  int32_t last = candidates.empty() ? 0 : candidates.front().token;
  for (const Candidate& c : candidates) {
    if (c.weight <= 0.0f) continue;
    cum += c.weight;
    last = c.token;
    if (cum > target) return c.token;
  }
  return last;  // only reachable through rounding when u is within an ulp of 1
}

}  // namespace fp4serve::kernels::cpu
