// The Qwen3.5/3.6 MoE text model (docs/ARCHITECTURE.md, "The model") written once against the backend
// seam (kernels/backend.h): one step runs any number of sequences, each with any number of new tokens
// (prefill chunks and decodes alike), and returns the logits of the rows that need them. Every op is
// row- or sequence-local, so a sequence's logits do not depend on what else is in the step or on how
// its prompt was split into chunks (exactly so on the CPU backend; see its numerics contract).
//
// Numerics follow HF transformers in bf16: activations are rounded to bf16 wherever HF holds a bf16
// tensor (every linear output, norms, residual adds), the GDN state and all reductions are fp32.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "checkpoint/weight_loader.h"
#include "model/model_weights.h"
#include "model/sequence_state.h"
#include "model/step_batch.h"
#include "model/step_profile.h"
#include "model/step_workspace.h"

namespace fp4serve::model {

struct StepSequence {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // new tokens, at positions state->length ...
  bool all_logits = false;          // logits for every new token (tests), else only the last
  std::span<const EmbeddingRows> embeds;  // as BatchSequence's (images)
  std::span<const MropeImage> mrope;
};

class Qwen35MoeModel {
 public:
  // On the process's default backend (kernels::default_backend(): the CPU on its best tier).
  explicit Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint);
  // On `backend`, which prepares the weights and must outlive the model.
  Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint, kernels::Backend& backend);
  // On a backend the model co-owns (the serving path: the backend lives as long as the model).
  Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint, std::shared_ptr<kernels::Backend> backend);

  kernels::Backend& backend() const { return *backend_; }
  const ModelConfig& config() const { return ck_->config(); }
  const LoadedCheckpoint& checkpoint() const { return *ck_; }
  int64_t vocab_size() const { return config().vocab_size; }

  // Contiguous host state for one sequence (tests and tools on a host-memory backend).
  SequenceState new_sequence(int64_t capacity, kernels::KvDtype kv_dtype = kernels::KvDtype::kBf16) const;

  // Runs the step and advances each state's length. Returns [rows, vocab] logits (fp32 holding the
  // bf16 values HF produces), rows in sequence order: one per sequence, or T for all_logits ones.
  // Throws std::invalid_argument for a token id outside the vocabulary or a sequence past capacity.
  // hidden_states (debugging and tests): when given, receives the residual stream after the
  // embedding and after every layer, [layers + 1][rows * hidden] bf16, as HF's output_hidden_states
  // (whose last entry is after the final norm).
  std::vector<float> forward(const std::vector<StepSequence>& step,
                             std::vector<std::vector<uint16_t>>* hidden_states = nullptr) const;

  // The engine's form: each sequence's state is wherever its refs point (paged KV blocks, a state
  // slot), positions start at pos0, snapshot copies are taken inside the step, and only the rows
  // asked for get logits ([rows, vocab], in sequence order). Lengths are the caller's to track.
  // profile (benchmarks): when given, the step's time by layer kind is added to it.
  // sink: receives the sink_rows of each sequence (required when any sequence has some); each row
  // is bit-identical to the same position's row returned by kAll.
  // This form makes a workspace for the call and returns the logits in host memory (tests, tools).
  std::vector<float> forward_batch(const std::vector<BatchSequence>& step,
                                   std::vector<std::vector<uint16_t>>* hidden_states = nullptr,
                                   StepProfile* profile = nullptr, const LogitsRowSink& sink = {}) const;

  // The serving form: every buffer comes from `ws` (sized for the step limits), nothing is
  // allocated. Returns the logits rows [rows, vocab] f32 as a view of ws's device memory, valid until
  // the next step on ws. Throws std::invalid_argument for a step beyond ws's limits.
  kernels::TensorView forward_step(std::span<const BatchSequence> step, StepWorkspace& ws,
                                   StepProfile* profile = nullptr, const LogitsRowSink& sink = {},
                                   std::vector<std::vector<uint16_t>>* hidden_states = nullptr) const;

  // The dimensions a backend sizes its scratch with (Backend::reserve).
  kernels::ModelShape shape() const;

  // The limits a workspace needs for exactly this step.
  kernels::StepLimits limits_for(std::span<const BatchSequence> step) const;

  // Rows per lm_head block for sink rows.
  static constexpr int64_t kSinkBlockRows = StepWorkspace::kSinkBlockRows;

  // ---- The MTP head (speculative decoding's drafter; mtp_forward.cpp, docs/model-arch.md §2.5) ----
  // Prepares the checkpoint's MTP block on the backend (its weights cost memory, so only on
  // request). Throws CheckpointError naming why when the checkpoint has no usable one.
  void bind_mtp();
  bool has_mtp() const { return w_.mtp != nullptr; }

  // What the MTP reads of the target: rows `rows` of the last step's residual stream (ws.x, valid
  // until the next step on ws) through the final norm into out [rows, H] bf16 -- the bits the
  // target's lm_head reads for those rows (vLLM feeds the MTP the model's normed output).
  void target_hidden_rows(const StepWorkspace& ws, std::span<const int64_t> rows, const kernels::TensorView& out) const;

  // One MTP step, following vLLM's Qwen3_5MultiTokenPredictor: per row at position p,
  //   u = fc(concat(norm_e(embed(token)), norm_h(hidden)));  u = DecoderLayer(u);  hidden' = norm(u)
  // and logits = lm_head(hidden'). A sequence's `tokens` are the token after each row's position
  // (the MTP at p predicts p + 2 from token p + 1 and the target's hidden state at p), `pos0` the
  // first row's position, `kv` one view: the MTP layer's paged KV (written at pos0 ..., attended
  // causally), `logits` kLast, kNone or kAll (gdn, copies and sink rows must be empty). hidden: [T, H]
  // bf16, one row per token of the step in order. Runs in ws (overwriting the target's
  // activations); returns the logits rows [R, V] in ws and writes those rows' hidden' to
  // hidden_out [R, H] (what a chained draft feeds back as its hidden state).
  kernels::TensorView forward_mtp(std::span<const BatchSequence> step, const kernels::TensorView& hidden,
                                  StepWorkspace& ws, const kernels::TensorView& cat_scratch,
                                  const kernels::TensorView& hidden_out) const;

  const kernels::GdnDims& gdn_dims() const { return w_.gdn_dims; }
  const ModelWeights& weights() const { return w_; }

 private:
  // Token ids, positions and row offsets of the step into ws (checked against the vocabulary).
  // mtp: an MTP step (no GDN states, one KV view per sequence).
  void stage_inputs(std::span<const BatchSequence> step, StepWorkspace& ws, bool mtp = false) const;
  // The step's given embedding rows (BatchSequence::embeds) over the looked-up ones in ws.x.
  void scatter_embeddings(std::span<const BatchSequence> step, StepWorkspace& ws, int64_t T) const;
  void gated_deltanet(const LayerWeights& layer, size_t gdn_index, std::span<const BatchSequence> step,
                      StepWorkspace& ws, int64_t T) const;
  void gated_attention(const LayerWeights& layer, size_t attn_index, std::span<const BatchSequence> step,
                       StepWorkspace& ws, int64_t T) const;
  // The sink rows of every sequence, block by block (kSinkBlockRows), to `sink`.
  void stream_sink_rows(std::span<const BatchSequence> step, StepWorkspace& ws, const LogitsRowSink& sink) const;
  // Final norm + lm_head of the given rows of ws.x into logits [rows, vocab] (picked: [rows, H] scratch).
  void lm_head_rows(const StepWorkspace& ws, std::span<const int64_t> rows, const kernels::TensorView& picked,
                    const kernels::TensorView& logits) const;

  std::shared_ptr<const LoadedCheckpoint> ck_;
  std::shared_ptr<kernels::Backend> owned_backend_;
  kernels::Backend* backend_;
  ModelWeights w_;
};

}  // namespace fp4serve::model
