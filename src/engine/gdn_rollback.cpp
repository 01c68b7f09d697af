#include "engine/gdn_rollback.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

GdnRollback::GdnRollback(kernels::Backend& backend, int max_num_seqs, int num_speculative_tokens, int num_gdn_layers,
                         const kernels::GdnDims& dims)
    : entries_(backend, max_num_seqs * num_speculative_tokens, num_gdn_layers, dims) {
  first_entry_.reserve(static_cast<std::size_t>(max_num_seqs));
}

void GdnRollback::begin_step(std::size_t num_scheduled) {
  first_entry_.assign(num_scheduled, -1);
  next_entry_ = 0;
}

int GdnRollback::assign(std::size_t scheduled_index, int d) {
  if (next_entry_ + d > entries_.entries())
    throw EngineLogicError(fmt::format("GDN rollback arena of {} entries is too small for this step's drafts",
                                       entries_.entries()));
  const int first = next_entry_;
  first_entry_.at(scheduled_index) = first;
  next_entry_ += d;
  return first;
}

void GdnRollback::apply(const SchedulerOutput& step, model::GdnStateArena& slots, model::GdnStateArena& snapshots) {
  for (const VerifyOutcome& v : step.verify_outcomes) {
    const ScheduledRequest& s = step.scheduled.at(static_cast<std::size_t>(v.scheduled_index));
    const int first = first_entry_.at(static_cast<std::size_t>(v.scheduled_index));
    const int d = s.num_draft_tokens;
    if (first < 0 || v.kept_tokens < 1 || v.kept_tokens > d + 1)
      throw EngineLogicError("verify outcome for a request that ran no drafts");
    // The state after k of the step's tokens: entry k - 1, or the slot itself after all 1 + d.
    // Snapshots first: they may read the slot before it is rolled back.
    for (const SnapshotPoint& p : step.snapshots_of(v)) {
      if (p.after_tokens <= d) snapshots.copy_from(entries_, first + p.after_tokens - 1, p.snapshot_id);
      else snapshots.copy_from(slots, s.state_slot, p.snapshot_id);
    }
    if (v.kept_tokens <= d) slots.copy_from(entries_, first + v.kept_tokens - 1, s.state_slot);
  }
}

}  // namespace fp4serve::engine
