// The Qwen3.5/3.6 MoE text model's weights as a backend holds them: a LinearHandle per linear and a
// MoeHandle per sparse MoE block (the backend decides their layout: panels on the fast CPU tiers,
// device memory on a GPU), and small dense parameters converted once to the fp32 values HF computes
// with (bf16-rounded, because HF loads them into a bf16 model) as device tensors.
//
// Built from a LoadedCheckpoint that has already been checked against its TensorPlan, so every
// tensor looked up here exists with a planned dtype and shape.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/model_config.h"
#include "checkpoint/weight_loader.h"
#include "kernels/backend.h"

namespace fp4serve::model {

struct GatedDeltaNetWeights {
  kernels::LinearHandle in_proj_qkv;  // [conv_dim, H]
  kernels::LinearHandle in_proj_z;    // [value_dim, H]
  kernels::LinearHandle in_proj_b;    // [Hv, H]
  kernels::LinearHandle in_proj_a;    // [Hv, H]
  kernels::TensorView conv_weight;    // [conv_dim, Kc] bf16 (conv1d.weight squeezed)
  kernels::TensorView dt_bias;        // [Hv] f32 holding bf16 values
  kernels::TensorView a_log;          // [Hv] f32, bf16-rounded (HF casts the F32 tensor into the bf16 model)
  kernels::TensorView norm_weight;    // [dv] f32, bf16-rounded, plain w
  kernels::LinearHandle out_proj;     // [H, value_dim]
};

struct GatedAttentionWeights {
  kernels::LinearHandle q_proj;  // [Hq * D * 2, H]: per head [q | gate]
  kernels::LinearHandle k_proj;  // [Hkv * D, H]
  kernels::LinearHandle v_proj;
  kernels::LinearHandle o_proj;  // [H, Hq * D]
  kernels::TensorView q_norm;    // [D] f32 (1 + w form applied by the op)
  kernels::TensorView k_norm;
  float k_scale = 1.0f;  // FP8 KV-cache scales from the checkpoint (1.0 when absent, as vLLM)
  float v_scale = 1.0f;
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinearAttention;
  kernels::TensorView input_norm;  // [H] f32
  kernels::TensorView post_norm;   // [H] f32
  GatedDeltaNetWeights gdn;        // kind == kLinearAttention
  GatedAttentionWeights attn;      // kind == kFullAttention
  kernels::MoeHandle moe;
};

// The MTP block (docs/model-arch.md §2.5; vLLM qwen3_5_mtp.py): three (1 + w) norms, fc over
// concat(embedding, hidden) and one full-attention decoder layer with its sparse MoE block. The
// embedding table and lm_head are the trunk's (mtp_use_dedicated_embeddings is false in every release).
struct MtpWeights {
  kernels::TensorView pre_fc_norm_embedding;  // [H] f32
  kernels::TensorView pre_fc_norm_hidden;     // [H] f32
  kernels::LinearHandle fc;                   // [H, 2H]
  LayerWeights layer;                         // kind kFullAttention
  kernels::TensorView norm;                   // [H] f32
};

struct ModelWeights {
  kernels::TensorView embed_tokens;  // [vocab, H] bf16 (a converted copy if the file is not bf16)
  std::vector<LayerWeights> layers;
  kernels::TensorView final_norm;    // [H] f32
  kernels::LinearHandle lm_head;     // [vocab, H]
  kernels::GdnDims gdn_dims;
  kernels::RopeConfig rope;
  // Host tensors converted at load (bf16-rounded norms, a bf16 copy of a non-bf16 embedding) that
  // prepared views may point into (the CPU backend uses host memory in place).
  std::vector<std::shared_ptr<void>> owned;
  // Bound on request (Qwen35MoeModel::bind_mtp): only speculative decoding reads it.
  std::shared_ptr<const MtpWeights> mtp;
};

// Throws CheckpointError naming the tensor when something cannot be bound (e.g. a layout the
// forward pass does not support yet). The backend prepares every weight (and keeps them); it must
// outlive the returned weights.
ModelWeights bind_model_weights(const LoadedCheckpoint& ck, kernels::Backend& backend);

// The checkpoint's MTP block, prepared by `backend`; host copies go to w.owned. Throws
// CheckpointError with LoadedCheckpoint::mtp_unavailable_reason() when it has no usable one.
MtpWeights bind_mtp_weights(const LoadedCheckpoint& ck, kernels::Backend& backend, ModelWeights& w);

}  // namespace fp4serve::model
