#include "engine/step_sampling.h"

#include <fmt/format.h>

#include "engine/engine_error.h"
#include "engine/request.h"

namespace fp4serve::engine {

void StepSampling::build(const SchedulerOutput& step, std::span<float> logits, std::size_t vocab,
                         const ParamsOf& params_of) {
  const std::size_t n = step.scheduled.size();
  inputs_.clear();
  first_row_.assign(n, -1);
  if (histories_.size() < n) histories_.resize(n);
  std::size_t rows = 0;
  for (const ScheduledRequest& s : step.scheduled) rows += static_cast<std::size_t>(s.num_logit_rows());
  if (logits.size() != rows * vocab)
    throw EngineLogicError(fmt::format("step returned {} logits for {} rows of {}", logits.size(), rows, vocab));
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (!s.needs_logits) continue;
    const Request& r = *s.request;
    first_row_[i] = static_cast<int>(inputs_.size());
    SampleInput in;
    in.params = params_of(r);
    in.prompt_ids = r.prompt_token_ids();
    in.output_ids = r.output_token_ids();
    if (s.num_draft_tokens > 0) {
      // Row j sees the outputs followed by drafts 0 .. j-1: the history it has if it is used at all.
      std::vector<std::int32_t>& h = histories_[i];
      h.assign(in.output_ids.begin(), in.output_ids.end());
      h.insert(h.end(), s.tokens.begin() + 1, s.tokens.end());
      in.output_ids = std::span<const std::int32_t>(h).first(r.output_token_ids().size());
    }
    for (int j = 0; j < s.num_logit_rows(); ++j) {
      in.logits = logits.subspan(inputs_.size() * vocab, vocab);
      if (j > 0) in.output_ids = std::span<const std::int32_t>(histories_[i]).first(in.output_ids.size() + 1);
      inputs_.push_back(in);
    }
  }
}

std::span<const std::span<const std::int32_t>> StepSampling::accept(const SchedulerOutput& step,
                                                                     std::span<const SampleOutput> sampled) {
  if (sampled.size() != inputs_.size())
    throw EngineLogicError(fmt::format("{} sampled rows for {} inputs", sampled.size(), inputs_.size()));
  const std::size_t n = step.scheduled.size();
  emitted_tokens_.clear();
  std::vector<std::size_t>& ends = end_scratch_;
  ends.assign(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (first_row_[i] >= 0) {
      const auto first = static_cast<std::size_t>(first_row_[i]);
      for (int j = 0; j <= s.num_draft_tokens; ++j) {
        const std::int32_t t = sampled[first + static_cast<std::size_t>(j)].token;
        emitted_tokens_.push_back(t);
        // Accept draft j while it is what the target sampled; the first mismatch is the correction.
        if (j == s.num_draft_tokens || t != s.tokens[static_cast<std::size_t>(1 + j)]) break;
      }
    }
    ends[i] = emitted_tokens_.size();
  }
  emitted_.clear();
  for (std::size_t i = 0, begin = 0; i < n; begin = ends[i], ++i)
    emitted_.push_back(std::span<const std::int32_t>(emitted_tokens_).subspan(begin, ends[i] - begin));
  return emitted_;
}

}  // namespace fp4serve::engine
