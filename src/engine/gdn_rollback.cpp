#include "engine/gdn_rollback.h"

#include <fmt/format.h>

#include "engine/engine_error.h"

namespace fp4serve::engine {

GdnRollback::GdnRollback(int max_num_seqs, int num_speculative_tokens, int num_gdn_layers,
                         const kernels::GdnDims& dims)
    : entries_(max_num_seqs * num_speculative_tokens, num_gdn_layers, dims), num_gdn_layers_(num_gdn_layers) {
  first_entry_.reserve(static_cast<std::size_t>(max_num_seqs));
}

void GdnRollback::begin_step(std::size_t num_scheduled) {
  first_entry_.assign(num_scheduled, -1);
  next_entry_ = 0;
}

void GdnRollback::add_copy_points(std::size_t scheduled_index, const ScheduledRequest& s, model::BatchSequence& b) {
  const int d = s.num_draft_tokens;
  if (d <= 0) return;
  if (!b.copies.empty()) throw EngineLogicError("a verify step with in-step snapshot points");
  if (next_entry_ + d > entries_.entries())
    throw EngineLogicError(fmt::format("GDN rollback arena of {} entries is too small for this step's drafts",
                                       entries_.entries()));
  first_entry_.at(scheduled_index) = next_entry_;
  for (int j = 0; j < d; ++j) b.copies.push_back(model::StateCopyPoint{j + 1, entries_.refs(next_entry_ + j)});
  next_entry_ += d;
}

void GdnRollback::apply(const SchedulerOutput& step, model::GdnStateArena& slots, model::GdnStateArena& snapshots) {
  if (num_gdn_layers_ == 0) return;
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
