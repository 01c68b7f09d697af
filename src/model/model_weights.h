// The Qwen3.5/3.6 MoE text model's weights as the kernels consume them: one kernels::WeightView per
// linear (zero-copy into the checkpoint's mmap where the on-disk layout is the compute layout),
// small dense parameters converted once to the fp32 values HF computes with (bf16-rounded, because
// HF loads them into a bf16 model), and repacked INT4 kept alive here.
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
#include "kernels/attention.h"
#include "kernels/gdn.h"
#include "kernels/moe.h"
#include "kernels/packed_weight.h"
#include "kernels/rope.h"
#include "kernels/weights.h"

namespace fp4serve::model {

struct GatedDeltaNetWeights {
  kernels::WeightView in_proj_qkv;  // [conv_dim, H]
  kernels::WeightView in_proj_z;    // [value_dim, H]
  kernels::WeightView in_proj_b;    // [Hv, H]
  kernels::WeightView in_proj_a;    // [Hv, H]
  std::vector<uint16_t> conv_weight;  // [conv_dim, Kc] bf16 (conv1d.weight squeezed)
  std::vector<float> dt_bias;         // [Hv] bf16 values
  std::vector<float> a_log;           // [Hv] bf16-rounded (HF casts the F32 tensor into the bf16 model)
  std::vector<float> norm_weight;     // [dv] bf16-rounded, plain w
  kernels::WeightView out_proj;       // [H, value_dim]
};

struct GatedAttentionWeights {
  kernels::WeightView q_proj;  // [Hq * D * 2, H]: per head [q | gate]
  kernels::WeightView k_proj;  // [Hkv * D, H]
  kernels::WeightView v_proj;
  kernels::WeightView o_proj;  // [H, Hq * D]
  std::vector<float> q_norm;   // [D] (1 + w form applied by the kernel)
  std::vector<float> k_norm;
  float k_scale = 1.0f;  // FP8 KV-cache scales from the checkpoint (1.0 when absent, as vLLM)
  float v_scale = 1.0f;
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinearAttention;
  std::vector<float> input_norm;  // [H]
  std::vector<float> post_norm;   // [H]
  GatedDeltaNetWeights gdn;       // kind == kLinearAttention
  GatedAttentionWeights attn;     // kind == kFullAttention
  kernels::MoeWeights moe;
};

struct ModelWeights {
  const uint16_t* embed_tokens = nullptr;  // [vocab, H] bf16 (converted copy if the file is not bf16)
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [H]
  kernels::WeightView lm_head;    // [vocab, H]
  kernels::GdnDims gdn_dims;
  kernels::RopeConfig rope;
  // Converted or repacked tensors that views above point into.
  std::vector<std::shared_ptr<void>> owned;
  // Linears repacked into panels for the CPU tier's panel kernels (0 on tiers without them), in
  // one huge-page arena.
  std::shared_ptr<kernels::PanelArena> panel_arena;
  int64_t packed_linears = 0;
  int64_t packed_bytes = 0;
  double pack_seconds = 0;
};

// Throws CheckpointError naming the tensor when something cannot be bound (e.g. a layout the
// forward pass does not support yet).
ModelWeights bind_model_weights(const LoadedCheckpoint& ck);

}  // namespace fp4serve::model
