#include "engine/structured/structured_rows.h"

#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/step_sampling.h"
#include "engine/structured/structured_output_state.h"

namespace fp4serve::engine {

void StructuredRows::apply(const SchedulerOutput& step, const StepSampling& rows, Sampler& sampler,
                           const StateOf& state_of, std::int64_t logits_size) {
  const std::size_t words = bitmask_words(logits_size);
  // Scratch for every draft row first: the spans handed to the sampler must not move.
  std::size_t draft_rows = 0;
  for (const ScheduledRequest& s : step.scheduled) {
    if (s.num_logit_rows() > 1 && state_of(*s.request)) draft_rows += static_cast<std::size_t>(s.num_logit_rows() - 1);
  }
  if (scratch_.size() < draft_rows * words) scratch_.resize(draft_rows * words);
  std::size_t next_scratch = 0;
  for (std::size_t i = 0; i < step.scheduled.size(); ++i) {
    const ScheduledRequest& s = step.scheduled[i];
    if (s.num_logit_rows() == 0) continue;
    StructuredOutputState* state = state_of(*s.request);
    if (state == nullptr) continue;
    const int index = static_cast<int>(i);
    if (state->constrained()) sampler.set_row_bitmask(rows.row(index, 0), state->mask());
    const std::span<const std::int32_t> outputs = s.request->output_token_ids();
    for (int j = 1; j < s.num_logit_rows(); ++j) {
      const std::span<std::int32_t> out(scratch_.data() + next_scratch * words, words);
      ++next_scratch;
      // s.tokens = the last token, then the drafts: row j follows drafts 0 .. j-1.
      if (state->mask_after(outputs, s.tokens.subspan(1, static_cast<std::size_t>(j)), out))
        sampler.set_row_bitmask(rows.row(index, j), out);
    }
  }
}

void StructuredRows::cut_drafts(std::span<Request* const> running, const StateOf& state_of) {
  for (Request* r : running) {
    if (r->draft_token_ids.empty()) continue;
    StructuredOutputState* state = state_of(*r);
    if (state == nullptr) continue;
    r->draft_token_ids.resize(state->valid_draft_prefix(r->output_token_ids(), r->draft_token_ids));
  }
}

}  // namespace fp4serve::engine
