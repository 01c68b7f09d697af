#include "engine/step_sampling.h"

#include <fmt/format.h>

#include "engine/engine_error.h"
#include "engine/request.h"

namespace fp4serve::engine {

template <class Row>
void StepSampling::for_each_row(const SchedulerOutput& step, std::size_t logits_rows, Row&& row) {
  const std::size_t n = step.scheduled.size();
  first_row_.assign(n, -1);
  if (histories_.size() < n) histories_.resize(n);
  std::size_t rows = 0;
  for (const ScheduledRequest& s : step.scheduled) rows += static_cast<std::size_t>(s.num_logit_rows());
  if (logits_rows != rows)
    throw EngineLogicError(fmt::format("step returned {} logits rows for {} sampled rows", logits_rows, rows));
  num_rows_ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (!s.needs_logits) continue;
    const Request& r = *s.request;
    first_row_[i] = static_cast<int>(num_rows_);
    std::span<const std::int32_t> output_ids = r.output_token_ids();
    if (s.num_draft_tokens > 0) {
      // Row j sees the outputs followed by drafts 0 .. j-1: the history it has if it is used at all.
      std::vector<std::int32_t>& h = histories_[i];
      h.assign(output_ids.begin(), output_ids.end());
      h.insert(h.end(), s.tokens.begin() + 1, s.tokens.end());
      output_ids = std::span<const std::int32_t>(h).first(r.output_token_ids().size());
    }
    for (int j = 0; j < s.num_logit_rows(); ++j) {
      if (j > 0) output_ids = std::span<const std::int32_t>(histories_[i]).first(output_ids.size() + 1);
      row(r, output_ids);
      ++num_rows_;
    }
  }
}

void StepSampling::add_rows(const SchedulerOutput& step, int64_t logits_rows, Sampler& sampler,
                            const OptionsOf& options_of) {
  inputs_.clear();
  for_each_row(step, static_cast<std::size_t>(logits_rows), [&](const Request& r, std::span<const std::int32_t> out) {
    sampler.add_row(*options_of(r), r.prompt_token_ids(), out);
  });
}

void StepSampling::build(const SchedulerOutput& step, std::span<float> logits, std::size_t vocab,
                         const ParamsOf& params_of) {
  inputs_.clear();
  if (vocab == 0 || logits.size() % vocab != 0)
    throw EngineLogicError(fmt::format("step returned {} logits, not whole rows of {}", logits.size(), vocab));
  for_each_row(step, logits.size() / vocab, [&](const Request& r, std::span<const std::int32_t> out) {
    SampleInput in;
    in.logits = logits.subspan(inputs_.size() * vocab, vocab);
    in.params = params_of(r);
    in.prompt_ids = r.prompt_token_ids();
    in.output_ids = out;
    inputs_.push_back(in);
  });
}

std::span<const std::int32_t> StepSampling::sample_forks(const SchedulerOutput& step, const kernels::TensorView& logits,
                                                         Sampler& sampler, const OptionsOf& options_of,
                                                         const MaskOf& mask_of) {
  fork_outputs_.clear();
  fork_tokens_.clear();
  first_fork_.assign(step.scheduled.size(), -1);
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (s.fork_children.empty()) continue;
    if (first_row_.at(i) < 0) throw EngineLogicError("fork children on a request without a logits row");
    first_fork_[i] = static_cast<int>(fork_outputs_.size());
    const kernels::TensorView row = logits.rows(first_row_[i], 1);
    for (const Request* child : s.fork_children) {
      sampler.add_row(*options_of(*child), child->prompt_token_ids(), child->output_token_ids());
      if (mask_of) {
        if (const std::span<const std::int32_t> mask = mask_of(*child); !mask.empty()) sampler.set_row_bitmask(0, mask);
      }
      std::vector<SampleOutput> out = sampler.sample_step(row);
      fork_tokens_.push_back(out.front().token);
      fork_outputs_.push_back(std::move(out.front()));
    }
  }
  return fork_tokens_;
}

std::span<const std::span<const std::int32_t>> StepSampling::accept(const SchedulerOutput& step,
                                                                     std::span<const SampleOutput> sampled) {
  if (sampled.size() != num_rows_)
    throw EngineLogicError(fmt::format("{} sampled rows for {} rows", sampled.size(), num_rows_));
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
