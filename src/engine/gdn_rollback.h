// Rolling the GDN state back after a verify step (speculative decoding). A KV cache is rolled back by
// forgetting rows; the recurrent state cannot be: after the step it already includes every draft. So
// while the step runs, the model copies the state after each of the first d of the request's 1 + d
// tokens into a rollback entry (in-step StateCopyPoints, the mechanism prefix-cache snapshots use);
// once the scheduler knows how many tokens were kept, the slot is restored from the entry of the
// last kept one (nothing to do when all were kept: the slot already holds that state), and the
// prefix-cache snapshots that fell inside the kept drafts are copied from the entries too.
//
// vLLM does the same for its hybrid models with 1 + num_speculative_tokens state blocks per request,
// the kernel writing the state after each position and the next step reading the accepted one
// [vllm: v1/attention/backends/gdn_attn.py, spec_state_indices / num_accepted_tokens]; here the
// entries are a separate arena so a slot stays one entry.
//
// Cost (Qwen3.6-35B-A3B: one GDN state is ~61 MiB per sequence, 30 layers x 2 MiB of recurrent
// state): a verify step writes d x 61 MiB per request into the rollback entries (0.24 GiB at d = 4,
// about 15% of the ~1.7 GB of NVFP4 weights a batch-1 decode step reads; 7.6 GiB per step at batch
// 32) and, after a rejection, copies 61 MiB back. The arena holds max_num_seqs x d entries (64 x 4 x
// 61 MiB = 15 GiB), which the cache plan takes from the state half of the budget, so speculative
// decoding lowers the max_num_seqs that fits. The cheaper alternative for the real model, left for
// the MTP issue: keep one copy of the state before the step and, after a rejection, replay the
// recurrence of the kept tokens from their saved per-token inputs (q, k, v, gate, beta: a few KiB per
// token and layer).
//
// Entries are handed out per step in scheduled order, d per verify request, so max_num_seqs x
// num_speculative_tokens always suffice.
#pragma once

#include <cstddef>
#include <vector>

#include "engine/scheduler_output.h"
#include "model/state_arena.h"

namespace fp4serve::engine {

class GdnRollback {
 public:
  GdnRollback() = default;
  GdnRollback(kernels::Backend& backend, int max_num_seqs, int num_speculative_tokens, int num_gdn_layers,
              const kernels::GdnDims& dims);

  int num_entries() const { return entries_.entries(); }
  const model::GdnStateArena& entries() const { return entries_; }

  // Start of a step of num_scheduled requests: no entries in use.
  void begin_step(std::size_t num_scheduled);
  // The first of d consecutive entries for the verify request at scheduled_index: entry first + j is
  // to receive the state after j + 1 of its tokens (the model runner adds the StateCopyPoints).
  // EngineLogicError when the arena is too small.
  int assign(std::size_t scheduled_index, int d);
  // After update_from_emitted: restores each verify request's slot to its kept length and copies the
  // kept snapshots (SchedulerOutput::verify_outcomes) into the snapshot arena.
  void apply(const SchedulerOutput& step, model::GdnStateArena& slots, model::GdnStateArena& snapshots);

 private:
  model::GdnStateArena entries_;
  std::vector<int> first_entry_;  // per scheduled request of the current step (-1: no drafts)
  int next_entry_ = 0;
};

}  // namespace fp4serve::engine
