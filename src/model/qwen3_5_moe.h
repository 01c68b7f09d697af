// The Qwen3.5/3.6 MoE text model (model-arch.md section 2) on the CPU kernels: one step runs any
// number of sequences, each with any number of new tokens (prefill chunks and decodes alike), and
// returns the logits of the rows that need them. Every op is row- or sequence-local with a fixed
// reduction order (kernels/), so a sequence's logits do not depend on what else is in the step, on
// how its prompt was split into chunks, or on the thread count.
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

namespace fp4serve::model {

struct StepSequence {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;  // new tokens, at positions state->length ...
  bool all_logits = false;          // logits for every new token (tests), else only the last
};

class Qwen35MoeModel {
 public:
  explicit Qwen35MoeModel(std::shared_ptr<const LoadedCheckpoint> checkpoint);

  const ModelConfig& config() const { return ck_->config(); }
  const LoadedCheckpoint& checkpoint() const { return *ck_; }
  int64_t vocab_size() const { return config().vocab_size; }

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
  std::vector<float> forward_batch(const std::vector<BatchSequence>& step,
                                   std::vector<std::vector<uint16_t>>* hidden_states = nullptr,
                                   StepProfile* profile = nullptr, const LogitsRowSink& sink = {}) const;

  // Rows per lm_head block for sink rows: 64 x 248320 floats = 64 MB at a time.
  static constexpr int64_t kSinkBlockRows = 64;

  const kernels::GdnDims& gdn_dims() const { return w_.gdn_dims; }
  const ModelWeights& weights() const { return w_; }

 private:
  std::vector<float> forward_step(const std::vector<BatchSequence>& step,
                                  std::vector<std::vector<uint16_t>>* hidden_states, StepProfile* profile,
                                  const LogitsRowSink& sink) const;
  // The sink rows of every sequence, block by block (kSinkBlockRows), to `sink`.
  void stream_sink_rows(const std::vector<BatchSequence>& step, std::span<const int64_t> row_offsets,
                        const uint16_t* x, const LogitsRowSink& sink) const;
  // Final norm + lm_head of the given rows of x ([*, hidden] bf16) into out ([rows, vocab]).
  void lm_head_rows(const uint16_t* x, std::span<const int64_t> rows, float* out) const;

  std::shared_ptr<const LoadedCheckpoint> ck_;
  ModelWeights w_;
};

}  // namespace fp4serve::model
