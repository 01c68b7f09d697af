// What one scheduler step hands to the model runner (vLLM SchedulerOutput, flattened): per scheduled
// request the tokens to run, its KV block table, its GDN state slot and how to initialise it,
// whether its last row needs logits (and which rows score prompt tokens), and where to copy GDN state snapshots.
// A request verifying speculative drafts runs its last token plus the drafts and needs a logits row
// for each; once the scheduler knows how many were kept it writes, per such request, what the model
// runner must do to the GDN state (roll back, take the snapshots the kept tokens passed).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_hash.h"

namespace fp4serve::engine {

class Request;

// How the model prepares a request's GDN state slot before running its tokens.
enum class StateInit : std::uint8_t {
  kContinue,  // the slot already holds the state after start_position tokens
  kZero,      // fresh sequence from token 0: zero conv and recurrent state
  kRestore,   // prefix-cache hit: copy snapshot restore_snapshot_id into the slot first
};

// "After running the first after_tokens of this request's scheduled tokens, copy its GDN state into
// snapshot snapshot_id." The GDN layers run the recurrent form, which the model can split at any
// token bit-identically, so snapshots need no chunk alignment.
struct SnapshotPoint {
  int after_tokens = 0;
  int snapshot_id = -1;
  // Scheduler bookkeeping; the model ignores these.
  int boundary_tokens = 0;  // absolute position: the snapshot is the state after this many tokens
  BlockHash key = 0;
  bool is_tail = false;
};

struct ScheduledRequest {
  Request* request = nullptr;
  int start_position = 0;         // = num_computed_tokens before the step; first token's position
  int num_scheduled_tokens = 0;   // tokens.size(), drafts included
  // The tokens to run, at positions start_position ...: all_token_ids()[start, start + n), or for a
  // verify step the request's last token followed by its num_draft_tokens drafts. Valid for the step.
  std::span<const std::int32_t> tokens;
  int num_draft_tokens = 0;       // > 0: a verify step (speculative decoding)
  std::span<const std::int32_t> new_block_ids;  // blocks allocated this step (tail of block_table)
  std::span<const std::int32_t> block_table;    // all blocks, token order
  int state_slot = -1;
  StateInit state_init = StateInit::kContinue;
  int restore_snapshot_id = -1;
  bool needs_logits = false;      // the step reaches the end of the known tokens: sample
  // Prompt logprobs: the logits rows of the first this many scheduled tokens score the prompt
  // token after each (positions start .. start + n - 1 score tokens start + 1 .. start + n).
  int prompt_logit_rows = 0;
  bool resumed = false;           // first step after a preemption (recompute)
  int snapshot_begin = 0;         // range in SchedulerOutput::snapshot_points, in token order
  int snapshot_count = 0;

  // Logits rows the step returns for this request: the last token's, and one per draft.
  int num_logit_rows() const { return needs_logits ? 1 + num_draft_tokens : 0; }
};

// Written by update_from_emitted for each verify step: the model runner must leave the request's GDN
// slot holding the state after the first kept_tokens of the step's tokens (its last token and the
// accepted drafts), and copy into each of the listed snapshots the state after p.after_tokens of
// them. Snapshot points inside the draft region are only planned here, once accepted, so a rejected
// token never reaches the prefix cache.
struct VerifyOutcome {
  int scheduled_index = -1;
  int kept_tokens = 0;            // 1 .. 1 + num_draft_tokens
  int snapshot_begin = 0;         // range in SchedulerOutput::kept_snapshot_points
  int snapshot_count = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledRequest> scheduled;  // running requests first, then newly admitted ones
  std::vector<SnapshotPoint> snapshot_points;
  int total_num_scheduled_tokens = 0;
  int num_preempted = 0;                    // requests preempted during this step
  // Filled by update_from_emitted (verify steps only); read by ModelRunner::apply_verify_outcomes.
  std::vector<VerifyOutcome> verify_outcomes;
  std::vector<SnapshotPoint> kept_snapshot_points;

  std::span<const SnapshotPoint> snapshots_of(const ScheduledRequest& s) const {
    return std::span<const SnapshotPoint>(snapshot_points)
        .subspan(static_cast<std::size_t>(s.snapshot_begin), static_cast<std::size_t>(s.snapshot_count));
  }
  std::span<const SnapshotPoint> snapshots_of(const VerifyOutcome& v) const {
    return std::span<const SnapshotPoint>(kept_snapshot_points)
        .subspan(static_cast<std::size_t>(v.snapshot_begin), static_cast<std::size_t>(v.snapshot_count));
  }
  void clear() {
    scheduled.clear();
    snapshot_points.clear();
    verify_outcomes.clear();
    kept_snapshot_points.clear();
    total_num_scheduled_tokens = 0;
    num_preempted = 0;
  }
};

}  // namespace fp4serve::engine
