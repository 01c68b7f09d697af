#include "kernels/cpu/sampling_logprobs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/cpu/sampling_selection.h"

namespace fp4serve::kernels::cpu {

namespace {

// "a ranks before b": higher logit first, lower id among equals.
struct RanksBefore {
  bool operator()(const TokenLogprob& a, const TokenLogprob& b) const {
    return a.logprob > b.logprob || (a.logprob == b.logprob && a.token < b.token);
  }
};

}  // namespace

std::size_t top_logits(std::span<const float> logits, std::size_t n, std::span<TokenLogprob> top) {
  // A bounded heap keeps this O(V log n); blocks of 64 whose max cannot beat the heap's worst are
  // skipped after one vectorised max (a later token equal to the worst never ranks before it: ties
  // go to the lower id).
  constexpr std::size_t kBlock = 64;
  n = std::min(n, top.size());
  if (n == 0) return 0;
  const auto heap = top.begin();  // max-heap under RanksBefore = the worst kept entry on top
  std::size_t size = 0;
  RanksBefore before;
  for (std::size_t begin = 0; begin < logits.size(); begin += kBlock) {
    const std::size_t end = std::min(logits.size(), begin + kBlock);
    if (size == n && !(row_max(logits.subspan(begin, end - begin)) > heap->logprob)) continue;
    for (std::size_t i = begin; i < end; ++i) {
      const TokenLogprob cand{static_cast<int32_t>(i), logits[i]};
      if (size < n) {
        heap[static_cast<std::ptrdiff_t>(size++)] = cand;
        std::push_heap(heap, heap + static_cast<std::ptrdiff_t>(size), before);
      } else if (before(cand, *heap)) {
        std::pop_heap(heap, heap + static_cast<std::ptrdiff_t>(n), before);
        heap[static_cast<std::ptrdiff_t>(n - 1)] = cand;
        std::push_heap(heap, heap + static_cast<std::ptrdiff_t>(n), before);
      }
    }
  }
  std::sort_heap(heap, heap + static_cast<std::ptrdiff_t>(size), before);
  return size;
}

double log_sum_exp(std::span<const float> logits) {
  const float max = row_max(logits);
  if (!std::isfinite(max)) return max;
  // Terms in float (vLLM's log_softmax is float32), summed in double.
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - max);
  return static_cast<double>(max) + std::log(sum);
}

}  // namespace fp4serve::kernels::cpu

namespace fp4serve::kernels {

SampleResult host_token_logprobs(std::span<const float> row, int32_t token, int64_t num_top,
                                 std::span<TokenLogprob> top) {
  const auto n = static_cast<std::size_t>(std::clamp<int64_t>(num_top, 0, static_cast<int64_t>(row.size())));
  if (top.size() < n)
    throw std::invalid_argument("logprobs: room for " + std::to_string(top.size()) + " top entries, " +
                                std::to_string(n) + " asked");
  SampleResult out;
  out.token = token;
  out.has_logprobs = true;
  const double lse = cpu::log_sum_exp(row);
  auto logprob = [lse](float x) { return static_cast<float>(static_cast<double>(x) - lse); };
  out.logprob = logprob(row[static_cast<std::size_t>(token)]);
  // Rank counts tokens whose (float) logprob is >= the token's, as vLLM compares logprobs, not
  // logits: two logits that round to the same logprob tie.
  int64_t rank = 0;
  for (float x : row) rank += logprob(x) >= out.logprob ? 1 : 0;
  out.rank = rank;
  out.num_top = static_cast<int64_t>(cpu::top_logits(row, n, top));
  for (std::size_t i = 0; i < static_cast<std::size_t>(out.num_top); ++i) top[i].logprob = logprob(top[i].logprob);
  return out;
}

}  // namespace fp4serve::kernels
