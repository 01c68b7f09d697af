// The Qwen3.5/3.6 vision tower (Qwen3_5MoeVisionModel, docs/model-arch.md §2.6) on a backend: patch
// embedding, the interpolated position embedding, `depth` pre-LN blocks with 2-D rotary attention
// confined to each image, and the 2x2 merger into the language model's hidden size. Runs in bf16
// with HF's roundings (kernels/vision.h), so its features match transformers' bf16 tower within
// bf16 noise (tests/unit/model/vision_tower_goldens_test.cpp states the tolerance).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "model/vision_config.h"
#include "model/vision_encoder.h"
#include "model/vision_weights.h"

namespace fp4serve::model {

class VisionTower final : public VisionEncoder {
 public:
  // `keep_alive` holds what the weights point into (the checkpoint's files); `backend` must outlive
  // the tower.
  VisionTower(VisionConfig config, VisionWeights weights, kernels::Backend& backend,
              std::shared_ptr<const void> keep_alive);

  // Throws std::invalid_argument for patches that do not fit the tower (patch size, grid, value count).
  std::vector<float> encode(const vision::PixelPatches& image) const override;
  void validate(const vision::PixelPatches& image) const override { check(image); }
  // Several images in one pass, as HF's batched call (attention stays within each image: cu_seqlens):
  // every image's rows, concatenated in order.
  std::vector<float> encode_batch(std::span<const vision::PixelPatches> images) const;
  int out_hidden() const override { return static_cast<int>(config_.out_hidden_size); }
  int spatial_merge_size() const override { return static_cast<int>(config_.spatial_merge_size); }

  const VisionConfig& config() const { return config_; }
  uint64_t weight_bytes() const { return weights_.bytes; }
  // Bytes of device memory an encode of `patches` patches in all allocates (its workspace and the
  // attention's fp32 K/V), the peak beyond the weights.
  int64_t activation_bytes(int64_t patches) const;
  // kHfEager (default) matches HF's eager attention bits; kFp32 is SDPA/flash-like.
  void set_attention_math(kernels::AttentionMath m) { math_ = m; }

 private:
  void check(const vision::PixelPatches& image) const;

  VisionConfig config_;
  VisionWeights weights_;
  kernels::Backend* backend_;
  std::shared_ptr<const void> keep_alive_;
  kernels::AttentionMath math_ = kernels::AttentionMath::kHfEager;
};

}  // namespace fp4serve::model
