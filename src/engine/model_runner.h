// Turns a scheduler step into a model step: owns the memory behind the scheduler's ids (the paged
// KV cache behind block ids, the GDN state arena behind slot ids, the snapshot arena behind snapshot
// ids) and the step workspace, all allocated through the model's backend at construction; prepares
// each request's state (zero, restore from a snapshot, continue), runs the forward and returns a view
// of the logits rows of the requests that sample this step; rows that score prompt tokens (prompt
// logprobs) stream to a callback instead. Verify steps (speculative decoding) get a row per token and
// have their GDN state rolled back afterwards (gdn_rollback.h).
//
// Allocation: everything a step needs is reserved at construction for the step limits (max tokens
// and sequences of a step), so execute() allocates nothing on the heap (tests/unit/engine
// step_allocation_test counts).
//
// Step graphs (docs/ARCHITECTURE.md, "Step graphs"; CUDA graphs): with graph_sizes, capture_graphs()
// records one pure-decode step per size through Backend::capture_step, each made of padding
// sequences (one token at position 0 in a reserved KV block and GDN slot). A later step whose
// sequences all run exactly one token (no drafts, prompt logit rows or images) is padded to the
// smallest captured size and replayed (Backend::replay_step); its GDN snapshot copies run after the
// replay (the same bits: a copy point after a decode's one token is the step's final state). The
// kernels are batch-invariant, so padding never changes a real row.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/gdn_rollback.h"
#include "engine/scheduler_output.h"
#include "model/paged_kv_cache.h"
#include "model/qwen3_5_moe.h"
#include "model/state_arena.h"
#include "model/step_workspace.h"

namespace fp4serve::engine {

struct ModelRunnerConfig {
  int num_kv_blocks = 0;
  int block_size = 16;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kBf16;
  int num_state_slots = 0;
  int num_snapshots = 0;
  // Step limits (the workspace's size): --max-num-batched-tokens, --max-num-seqs, --max-model-len.
  int max_num_batched_tokens = 2048;
  int max_num_seqs = 256;
  int max_model_len = 0;
  // Most drafts a request verifies per step: sizes the GDN rollback arena (max_num_seqs x this) and
  // the logits rows of a step (max_num_seqs x (1 + this)).
  int num_speculative_tokens = 0;
  // MTP speculative decoding (mtp_drafter.h): the KV cache gets one more layer, the MTP layer's, in
  // the same blocks, and extra_kv_blocks blocks past num_kv_blocks (the drafter's scratch, never
  // handed out by the engine's block pool).
  bool mtp_kv_layer = false;
  int extra_kv_blocks = 0;
  // Pure-decode graph sizes (ascending; cuda_graph_sizes.h's plan). Empty: every step eager. With
  // sizes, the runner reserves one more KV block and GDN slot (the padding's) and the step limits
  // grow to the largest size it can replay.
  std::vector<int> graph_sizes;
};

class ModelRunner {
 public:
  ModelRunner(const model::Qwen35MoeModel& model, const ModelRunnerConfig& config);

  // Receives the rows that score prompt tokens (ScheduledRequest::prompt_logit_rows), a block at a
  // time: `rows` is [count, vocab], the rows of positions first .. first + count - 1 of s.request.
  using PromptRowSink =
      std::function<void(const ScheduledRequest& s, int first_position, int count, const float* rows)>;

  // The embedding rows (images) of a scheduled request's tokens, relative to its first scheduled
  // token; called only for requests with images, alive until execute() returns.
  using ImageRowsSource = std::function<std::span<const model::EmbeddingRows>(const ScheduledRequest& s)>;

  // Logits rows ([rows, vocab] f32, device memory of the model's backend) of the scheduled requests
  // with needs_logits, in their order (num_logit_rows() each); valid until the next execute().
  // prompt_rows is required when a scheduled request has prompt_logit_rows; image_rows when one has
  // images (Request::mm, whose M-RoPE layout the runner passes to the model).
  kernels::TensorView execute(const SchedulerOutput& step, const PromptRowSink& prompt_rows = {},
                              const ImageRowsSource& image_rows = {});
  // After the scheduler's update_from_emitted of the same step: rolls verify requests' GDN state back
  // to their kept length and fills the snapshots their kept drafts passed. A no-op without drafts.
  void apply_verify_outcomes(const SchedulerOutput& step) { rollback_.apply(step, slots_, snapshots_); }

  // After the scheduler's update_from_emitted of the same step, after apply_verify_outcomes (a slot a
  // finished verify request freed may be a fork's destination): each forked child gets its source's
  // GDN state and, where the prompt ends inside a block, its own copy of the source's partial block.
  void apply_forks(const SchedulerOutput& step);

  // Start-up, before the first execute(): captures the graphs of config.graph_sizes, largest first
  // (as vLLM), logging the capture and its time. On a backend without graphs (capture_step returns
  // nullptr: the CPU) logs once that steps run eagerly. A no-op without graph sizes.
  void capture_graphs();
  // The sizes captured (ascending; empty: every step runs eagerly).
  const std::vector<int>& captured_graph_sizes() const { return captured_sizes_; }
  // Steps replayed from a graph since construction (tests).
  long graph_steps() const { return graph_steps_; }

  const model::Qwen35MoeModel& model() const { return *model_; }
  const model::StepWorkspace& workspace() const { return ws_; }
  // The workspace for the MTP drafter's passes, which run after the step's outputs are taken and
  // before the next execute() (they overwrite the step's activations and logits).
  model::StepWorkspace& scratch_workspace() { return ws_; }
  // The KV layer of the MTP head, or -1 without one.
  int mtp_kv_layer() const { return config_.mtp_kv_layer ? num_attention_layers_ : -1; }
  // For tests: the memory behind slot ids and block ids.
  const model::GdnStateArena& state_slots() const { return slots_; }
  const model::PagedKvCache& kv_cache() const { return kv_; }
  // The padding sequences' KV block and GDN slot (-1 without graph sizes): beyond the engine's ids.
  int padding_kv_block() const { return pad_block_; }
  int padding_state_slot() const { return pad_slot_; }
  // Fault injection for the canary's proof (issue 7): while on, the GDN state (recurrent and conv) of
  // every sequence in a step is zeroed after the step, i.e. each step resumes from a lost state --
  // what a prefix-cache or slot bug in a hybrid model does. Set from another thread (HTTP).
  void set_corrupt_gdn_state(bool on) { corrupt_gdn_state_.store(on, std::memory_order_relaxed); }

 private:
  const model::Qwen35MoeModel* model_;
  ModelRunnerConfig config_;
  int num_attention_layers_ = 0;
  int num_gdn_layers_ = 0;
  model::PagedKvCache kv_;
  model::GdnStateArena slots_;
  model::GdnStateArena snapshots_;
  GdnRollback rollback_;
  model::StepWorkspace ws_;
  // A step's descriptors, built in storage reserved at construction.
  std::vector<model::BatchSequence> batch_;
  std::vector<kernels::KvView> kv_views_;          // max_num_seqs x attention layers
  std::vector<kernels::GdnStateRef> gdn_refs_;     // max_num_seqs x GDN layers
  std::vector<model::StateCopyPoint> copies_;
  std::vector<kernels::GdnStateRef> copy_refs_;    // copies x GDN layers
  std::atomic<bool> corrupt_gdn_state_{false};

  // Step graphs.
  // The step's graph size when it can replay one (0: eager); fills batch_ (without padding) either way.
  int graph_size_for(const SchedulerOutput& step) const;
  // batch_ for the scheduled requests (and their copy points in copies_).
  void build_batch(const SchedulerOutput& step, const PromptRowSink& prompt_rows, const ImageRowsSource& image_rows);
  void append_padding(std::size_t count);
  kernels::TensorView replay(const SchedulerOutput& step, int size);
  std::vector<int> usable_sizes_;     // config.graph_sizes this runner's steps can reach
  std::vector<int> captured_sizes_;
  std::vector<std::unique_ptr<kernels::StepGraph>> graphs_;  // by captured_sizes_ index
  int pad_block_ = -1, pad_slot_ = -1;
  std::vector<int> pad_block_table_;
  std::vector<kernels::KvView> pad_kv_;          // attention layers
  std::vector<kernels::GdnStateRef> pad_gdn_;    // GDN layers
  std::vector<std::span<const model::StateCopyPoint>> deferred_copies_;  // per real sequence
  long graph_steps_ = 0;
};

}  // namespace fp4serve::engine
