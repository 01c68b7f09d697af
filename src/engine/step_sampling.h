// From a step's logits rows to the tokens each scheduled request emits, speculative verification
// included. An ordinary request has one row and emits the token sampled from it. A verify step has
// 1 + d rows for the request's last token and its d drafts; row j is sampled exactly as the plain
// decode step at that output position would sample it -- same processors (bad_words, min_tokens,
// logit_bias, penalties) over the same output history (the tokens so far plus drafts 0 .. j-1), and
// for a seeded request the same Philox draw, a function of (seed, output position) alone
// (kernels/sampling.h) -- and the drafts are accepted while the sampled token equals the draft. The first
// mismatch's sampled token is emitted as the correction; if every draft matches, the last row's token
// is the bonus (vLLM's names: rejection_sampler.py, whose greedy path is the same rule).
//
// Why this is lossless: row j is only used when drafts 0 .. j-1 were all accepted, i.e. equal the
// tokens actually emitted, so its context is exactly the plain decode's context at that position; the
// forward is bit-exact whatever the chunking (the CPU contract: row-local ops with fixed reduction
// order, a GDN recurrence that splits anywhere bit-identically), so its logits are the plain decode's
// bits, and so is every processed row. Each emitted token is therefore the token the plain decode would
// emit: identical output for greedy and seeded requests, whatever the drafts. An unseeded random
// request still draws every emitted token from the target distribution with a fresh uniform, but it
// takes one engine-generator draw per row, rejected rows included, so its stream differs from a run
// without drafts (as it does anyway under a different batch). vLLM's rejection sampling (accept a
// draft with probability min(1, p_target / p_draft), resample from the residual otherwise) is also
// lossless in distribution and accepts at least as often for a random request, but cannot give a
// seeded request the plain decode's exact tokens; with exact-match acceptance the drafter only ever
// changes speed.
//
// A request that finishes inside the accepted tokens (EOS, stop token, max_tokens) stops there: the
// scheduler drops the tokens after it (Scheduler::update_from_emitted); stop strings end it in the
// engine the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/sampler.h"
#include "engine/scheduler_output.h"

namespace fp4serve::engine {

class StepSampling {
 public:
  using OptionsOf = std::function<const kernels::SamplingOptions*(const Request&)>;
  using ParamsOf = std::function<const SamplingParams*(const Request&)>;

  // The engine's path: every logits row of the step added to `sampler` (Sampler::add_row, each
  // request's options made at admission), in the model runner's row order -- each scheduled request
  // with needs_logits has num_logit_rows() rows -- for Sampler::sample_step on the step's logits.
  // The rows' output histories live here until the next add_rows/build. EngineLogicError when
  // logits_rows is not the step's row count.
  void add_rows(const SchedulerOutput& step, int64_t logits_rows, Sampler& sampler, const OptionsOf& options_of);

  // After sample_step of the add_rows rows: the first token of every fork child of the step
  // (ScheduledRequest::fork_children), each sampled from its source's row 0 with the child's own
  // options and an empty output history -- what a single request with the child's options samples
  // from the same row. One op call per child: the op edits a row in place while it samples it (and
  // restores it), so two rows of one call must not share memory. Returns the tokens in
  // update_from_emitted's fork order.
  // A child with structured output gets its own first-token mask from mask_of (empty: none).
  using MaskOf = std::function<std::span<const std::int32_t>(const Request&)>;
  std::span<const std::int32_t> sample_forks(const SchedulerOutput& step, const kernels::TensorView& logits,
                                             Sampler& sampler, const OptionsOf& options_of,
                                             const MaskOf& mask_of = {});
  // The sample behind a StepResult of a fork child (its scheduled_index and fork_index).
  SampleOutput& fork_output(int scheduled_index, int fork_index) {
    return fork_outputs_.at(static_cast<std::size_t>(first_fork_.at(static_cast<std::size_t>(scheduled_index)) + fork_index));
  }

  // The same rows as Sampler inputs over host logits [rows, vocab], for Sampler::sample (tests that
  // step a stack by hand); logits must outlive the inputs.
  void build(const SchedulerOutput& step, std::span<float> logits, std::size_t vocab, const ParamsOf& params_of);
  std::span<const SampleInput> inputs() const { return inputs_; }

  // After sampling the rows: per scheduled request the tokens it emits (empty without logits; see
  // the file comment), for Scheduler::update_from_emitted. Valid until the next add_rows() or build().
  std::span<const std::span<const std::int32_t>> accept(const SchedulerOutput& step,
                                                         std::span<const SampleOutput> sampled);

  // The sampled row behind a StepResult (its scheduled_index and token_index).
  std::size_t row(int scheduled_index, int token_index) const {
    return static_cast<std::size_t>(first_row_.at(static_cast<std::size_t>(scheduled_index)) + token_index);
  }

 private:
  // Calls row(request, output_ids) for every logits row, in order, after checking the row count;
  // fills first_row_ and the verify rows' histories.
  template <class Row>
  void for_each_row(const SchedulerOutput& step, std::size_t logits_rows, Row&& row);

  std::size_t num_rows_ = 0;
  std::vector<SampleInput> inputs_;
  std::vector<int> first_row_;                        // per scheduled request (-1: no logits)
  std::vector<std::vector<std::int32_t>> histories_;  // per scheduled request: outputs + drafts (verify only)
  std::vector<std::int32_t> emitted_tokens_;
  std::vector<int> first_fork_;                       // per scheduled request: its first fork output
  std::vector<SampleOutput> fork_outputs_;
  std::vector<std::int32_t> fork_tokens_;
  std::vector<std::size_t> end_scratch_;
  std::vector<std::span<const std::int32_t>> emitted_;
};

}  // namespace fp4serve::engine
