#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/sampler_selection.h"

namespace fp4serve::engine {

namespace {

// "a ranks before b": higher logit first, lower id among equals (torch.topk leaves tie order
// unspecified; we pick the deterministic one).
struct RanksBefore {
  bool operator()(const TokenLogprob& a, const TokenLogprob& b) const {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  }
};

// The n best entries of `logits` by RanksBefore, best first. A bounded heap keeps this O(V log n);
// blocks of 64 whose max cannot beat the heap's worst are skipped after one vectorised max (a
// later token equal to the worst never ranks before it: ties go to the lower id).
std::vector<TokenLogprob> top_n(std::span<const float> logits, std::size_t n) {
  constexpr std::size_t kBlock = 64;
  std::vector<TokenLogprob> heap;  // max-heap under RanksBefore = the worst kept entry on top
  if (n == 0) return heap;
  heap.reserve(n);
  RanksBefore before;
  for (std::size_t begin = 0; begin < logits.size(); begin += kBlock) {
    const std::size_t end = std::min(logits.size(), begin + kBlock);
    if (heap.size() == n && !(row_max(logits.subspan(begin, end - begin)) > heap.front().logprob)) {
      continue;
    }
    for (std::size_t i = begin; i < end; ++i) {
      const TokenLogprob cand{static_cast<int32_t>(i), logits[i]};
      if (heap.size() < n) {
        heap.push_back(cand);
        std::push_heap(heap.begin(), heap.end(), before);
      } else if (before(cand, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), before);
        heap.back() = cand;
        std::push_heap(heap.begin(), heap.end(), before);
      }
    }
  }
  std::sort_heap(heap.begin(), heap.end(), before);
  return heap;
}

}  // namespace

double log_sum_exp(std::span<const float> logits) {
  const float max = row_max(logits);
  if (!std::isfinite(max)) return max;
  // Terms in float (vLLM's log_softmax is float32), summed in double.
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - max);
  return static_cast<double>(max) + std::log(sum);
}

SampleLogprobs compute_sample_logprobs(std::span<const float> logits, int32_t sampled_token,
                                       int64_t num_top) {
  SampleLogprobs out;
  const double lse = log_sum_exp(logits);
  auto logprob = [lse](float x) { return static_cast<float>(static_cast<double>(x) - lse); };

  out.sampled = {sampled_token, logprob(logits[static_cast<std::size_t>(sampled_token)])};
  // Rank counts tokens whose (float) logprob is >= the sampled one's, as vLLM compares logprobs,
  // not logits: two logits that round to the same logprob tie.
  int64_t rank = 0;
  for (float x : logits) rank += logprob(x) >= out.sampled.logprob ? 1 : 0;
  out.sampled_rank = rank;

  const auto n = static_cast<std::size_t>(
      std::clamp<int64_t>(num_top, 0, static_cast<int64_t>(logits.size())));
  out.top = top_n(logits, n);
  for (TokenLogprob& t : out.top) t.logprob = logprob(t.logprob);
  return out;
}

}  // namespace fp4serve::engine
