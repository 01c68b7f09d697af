// Every buffer one forward step of the model uses, allocated once through the backend for the step
// limits (--max-num-batched-tokens, --max-num-seqs, ...), so that a step allocates nothing: device
// tensors for activations and logits, and host staging (token ids, positions, per-sequence
// descriptors) with its capacity reserved. The engine's model runner holds one for its lifetime;
// the model's convenience calls (tests, tools) make one per call.
//
// Layers run one at a time, so the GDN and attention layers' scratch share one region; each view
// below is sized for limits.max_tokens rows and ops take the first T rows (TensorView::rows).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace fp4serve {
struct ModelConfig;
}

namespace fp4serve::model {

struct StepWorkspace {
  // Rows of the lm_head per sink block (prompt logprobs): 64 x 248,320 floats = 64 MB at a time.
  static constexpr int64_t kSinkBlockRows = 64;

  StepWorkspace(kernels::Backend& backend, const ModelConfig& config, const kernels::StepLimits& limits);

  kernels::StepLimits limits;
  int64_t bytes = 0;  // device memory held

  // Step inputs and the residual stream.
  kernels::TensorView ids;    // [T] i32
  kernels::TensorView pos;    // [T] i64 positions, or [3, T] (t, h, w axes) when pos_mrope
  bool pos_mrope = false;     // this step has a multimodal sequence (set by the model's staging)
  kernels::TensorView x;      // [T, H] bf16: the residual stream
  kernels::TensorView h;      // [T, H] bf16: normed input of a block
  kernels::TensorView mixed;  // [T, H] bf16: a block's output
  kernels::TensorView out_f32;  // [T, H] f32: out_proj / o_proj before rounding

  // Gated DeltaNet layer.
  kernels::TensorView gdn_qkv_f32, gdn_z_f32;           // [T, C], [T, Vd] f32
  kernels::TensorView gdn_a, gdn_b, gdn_g, gdn_beta;    // [T, Hv] f32
  kernels::TensorView gdn_qkv_raw, gdn_qkv;             // [T, C] bf16 (projection, conv output)
  kernels::TensorView gdn_z, gdn_core, gdn_normed;      // [T, Vd] bf16

  // Gated attention layer (q_proj rows are per head [q | gate]).
  kernels::TensorView attn_qg_f32;                      // [T, Hq * 2D] f32
  kernels::TensorView attn_k_f32, attn_v_f32;           // [T, Hkv * D] f32
  kernels::TensorView attn_qg;                          // [T, Hq, 2D] bf16
  kernels::TensorView attn_q;                           // [T, Hq, D] bf16
  kernels::TensorView attn_gate;                        // [T, Hq * D] bf16
  kernels::TensorView attn_k, attn_v;                   // [T, Hkv, D] bf16
  kernels::TensorView attn_out;                         // [T, Hq * D] bf16

  // lm_head.
  kernels::TensorView picked;       // [max_logit_rows, H] bf16
  kernels::TensorView logits;       // [max_logit_rows, V] f32
  kernels::TensorView sink_picked;  // [kSinkBlockRows, H] bf16
  kernels::TensorView sink_logits;  // [kSinkBlockRows, V] f32

  // Host staging, capacity reserved at construction.
  std::vector<int32_t> host_ids;
  std::vector<int64_t> host_pos;
  std::vector<int64_t> offsets;     // per sequence: first row; back() = rows
  std::vector<int64_t> logit_rows;  // rows through the lm_head, in sequence order
  std::vector<int64_t> sink_rows;
  std::vector<kernels::AttentionSeqDesc> attn_seqs;
  std::vector<float> host_sink;     // a sink block downloaded from a non-host device

  // The GDN layers' bookkeeping of rounds (Qwen35MoeModel::gated_deltanet): per sequence its run rows
  // and next copy point, which sequences repeat an earlier one's state, and one round's descriptors
  // and state copies; reserved for limits.max_seqs so that a step allocates nothing.
  struct GdnRounds {
    struct Cursor {
      int64_t done = 0;   // rows of the sequence already run
      size_t point = 0;   // its next copy point
    };
    std::vector<Cursor> cursors;
    std::vector<std::pair<const float*, size_t>> by_state;
    std::vector<char> shared;
    std::vector<kernels::GdnSeqDesc> descs;
    std::vector<kernels::GdnStateRef> copy_dst, copy_src;
  } gdn_rounds;

 private:
  kernels::DeviceBuffer buffer_;
};

}  // namespace fp4serve::model
