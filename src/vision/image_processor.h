// transformers' Qwen2VLImageProcessor (the torchvision backend, transformers' default) for one
// image [transformers: models/qwen2_vl/image_processing_qwen2_vl.py]: smart_resize to multiples of
// patch_size * merge_size within [min_pixels, max_pixels], bicubic antialiased uint8 resize,
// rescale and normalize fused as (x - mean/rescale) / (std/rescale) in fp32, the frame repeated to
// temporal_patch_size, and patches in HF's order. Settings come from the checkpoint's
// preprocessor_config.json.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "vision/pixel_patches.h"
#include "vision/rgb_image.h"

namespace fp4serve::vision {

struct ImageProcessorConfig {
  int patch_size = 16;
  int temporal_patch_size = 2;
  int merge_size = 2;
  std::int64_t min_pixels = 65536;     // size.shortest_edge
  std::int64_t max_pixels = 16777216;  // size.longest_edge
  double rescale_factor = 1.0 / 255.0;
  std::array<double, 3> image_mean{0.5, 0.5, 0.5};
  std::array<double, 3> image_std{0.5, 0.5, 0.5};

  // preprocessor_config.json's fields (size.shortest_edge/longest_edge, or min_pixels/max_pixels
  // which win, as the processor's __init__); missing fields keep the defaults above (Qwen3.6's).
  // Throws std::invalid_argument on a value of the wrong kind or out of range.
  static ImageProcessorConfig from_json(const nlohmann::json& j);
  int factor() const { return patch_size * merge_size; }
};

// The grid an image of this size preprocesses to (smart_resize / patch_size), without its pixels:
// what the prompt's <|image_pad|> run length needs. Throws ImageError for a bad aspect ratio.
ImageGrid image_grid_for(int height, int width, const ImageProcessorConfig& config);

PixelPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& config);

}  // namespace fp4serve::vision
