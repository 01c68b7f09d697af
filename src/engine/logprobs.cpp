#include "engine/logprobs.h"

#include <algorithm>

namespace fp4serve::engine {

SampleLogprobs to_sample_logprobs(const kernels::SampleResult& result, std::span<const TokenLogprob> top) {
  SampleLogprobs out;
  out.sampled = {result.token, result.logprob};
  out.sampled_rank = result.rank;
  const auto n = static_cast<std::size_t>(result.num_top);
  out.top.assign(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(std::min(n, top.size())));
  return out;
}

SampleLogprobs compute_sample_logprobs(std::span<const float> logits, int32_t sampled_token, int64_t num_top) {
  std::vector<TokenLogprob> top(
      static_cast<std::size_t>(std::clamp<int64_t>(num_top, 0, static_cast<int64_t>(logits.size()))));
  const kernels::SampleResult r = kernels::host_token_logprobs(logits, sampled_token, num_top, top);
  SampleLogprobs out = to_sample_logprobs(r, {});
  top.resize(static_cast<std::size_t>(r.num_top));  // moved in, not copied: -1 asks for the whole vocabulary
  out.top = std::move(top);
  return out;
}

}  // namespace fp4serve::engine
