// One preprocessed image as the vision tower takes it: transformers' Qwen2VLImageProcessor output
// (`pixel_values` rows and `image_grid_thw`) for a single image. The contract between the image
// pipeline (decode + preprocess, server side) and the tower (model side); nothing else lives here.
#pragma once

#include <cstdint>
#include <vector>

namespace fp4serve::vision {

// The image's patch grid, in patches of patch_size x patch_size pixels, before the 2x2 merge
// (HF image_grid_thw). t = frames / temporal_patch_size: 1 for an image (the frame is repeated).
struct ImageGrid {
  int t = 1;
  int h = 0;
  int w = 0;
  std::int64_t num_patches() const { return static_cast<std::int64_t>(t) * h * w; }
  // Rows of `<|image_pad|>` the image takes in the prompt, and rows the tower returns.
  std::int64_t num_llm_tokens(int spatial_merge_size) const {
    return num_patches() / (static_cast<std::int64_t>(spatial_merge_size) * spatial_merge_size);
  }
};

struct PixelPatches {
  ImageGrid grid;
  // in_channels * temporal_patch_size * patch_size^2 (3 * 2 * 16 * 16 = 1536 for Qwen3.6).
  int patch_dim = 0;
  // [grid.num_patches(), patch_dim] fp32, rescaled and normalized, in HF's order: each 2x2 merge
  // block of patches contiguous, a patch's values as (channel, temporal, row, col).
  std::vector<float> values;
};

}  // namespace fp4serve::vision
