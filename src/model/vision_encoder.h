// The seam between the language model and a vision tower: the engine asks for the rows that replace
// an image's `<|image_pad|>` embeddings and never sees how they are made (CPU tower, a GPU twin, or
// a test's fake). Implementations must be callable from the engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "vision/pixel_patches.h"

namespace fp4serve::model {

class VisionEncoder {
 public:
  virtual ~VisionEncoder() = default;
  // [image.grid.num_llm_tokens(spatial_merge_size()), out_hidden()] fp32, row-major: the merger's
  // output, in the order of the image's `<|image_pad|>` tokens.
  virtual std::vector<float> encode(const vision::PixelPatches& image) const = 0;
  // Throws std::invalid_argument saying why when encode() would refuse the image (patch size, grid):
  // the engine asks at submit(), so a misfit image is the request's 400, never a failed step.
  virtual void validate(const vision::PixelPatches& image) const {}
  virtual int out_hidden() const = 0;          // the language model's hidden size (2048)
  virtual int spatial_merge_size() const = 0;  // 2
};

}  // namespace fp4serve::model
