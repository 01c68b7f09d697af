// The vision tower's weights (model.visual.*, docs/model-arch.md §4.3) as a backend holds them: a
// LinearHandle per linear (the Conv3d patch embedding is one: kernel = stride, so it is a linear over
// each patch's in_channels * temporal * patch^2 values in (c, t, row, col) order), and biases and
// LayerNorm parameters as bf16-rounded f32 device tensors (HF loads them into a bf16 model).
//
// Every release keeps the tower in BF16 (the NVFP4 and FP8 quantizers exclude *visual*); F16 and F32
// tensors are converted to bf16 as from_pretrained(dtype=bfloat16) would, and a quantized tensor is
// refused with a CheckpointError naming it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/sharded_checkpoint.h"
#include "kernels/backend.h"
#include "model/vision_config.h"

namespace fp4serve::model {

struct VisionLinear {
  kernels::LinearHandle w;
  kernels::TensorView bias;  // [n] f32
};

struct VisionLayerNorm {
  kernels::TensorView w;  // [D] f32
  kernels::TensorView b;  // [D] f32
};

struct VisionBlockWeights {
  VisionLayerNorm norm1, norm2;
  VisionLinear qkv;   // [3 * hidden, hidden]: rows (q | k | v), each (head, head_dim)
  VisionLinear proj;  // [hidden, hidden]
  VisionLinear fc1;   // [intermediate, hidden]
  VisionLinear fc2;   // [hidden, intermediate]
};

struct VisionWeights {
  VisionLinear patch_embed;               // [hidden, patch_dim]
  const uint16_t* pos_embed = nullptr;    // [num_position_embeddings, hidden] bf16, host (interpolated on the host)
  std::vector<VisionBlockWeights> blocks;
  VisionLayerNorm merger_norm;            // [hidden]
  VisionLinear merger_fc1;                // [4 * hidden, 4 * hidden]
  VisionLinear merger_fc2;                // [out_hidden, 4 * hidden]
  std::vector<std::shared_ptr<void>> owned;  // converted host copies the views point into
  uint64_t bytes = 0;                     // the tower's tensors in the checkpoint
};

inline constexpr const char* kVisionPrefix = "model.visual.";

// Every tensor of the tower and its shape (the release's names, docs/model-arch.md §4.3): 333 for
// the release's depth 27.
std::vector<std::pair<std::string, std::vector<int64_t>>> vision_tensor_shapes(const VisionConfig& config);

// Whether the files hold a vision tower (any model.visual.* tensor).
bool has_vision_tensors(const ShardedCheckpoint& files);

// Checks every tensor of the tower against `config` (present, a float dtype, the expected shape) and
// throws one CheckpointError listing every problem by tensor name; then prepares them on `backend`.
// The files must outlive the weights (the position table is read in place).
VisionWeights bind_vision_weights(const ShardedCheckpoint& files, const VisionConfig& config, kernels::Backend& backend);

}  // namespace fp4serve::model
