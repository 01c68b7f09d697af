// The images of one request as the engine takes them: where each image's run of `<|image_pad|>`
// tokens sits in the prompt, its pixels (encoded by the model's VisionEncoder when its rows are
// first prefilled) and a hash of its content (mixed into the prefix-cache hashes of the blocks
// that hold its tokens, so the same image hits and a different one with the same token ids does not).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "vision/pixel_patches.h"

namespace fp4serve::engine {

struct ImageInput {
  std::shared_ptr<const vision::PixelPatches> pixels;
  int offset = 0;      // index in the prompt of the image's first <|image_pad|> token
  int num_tokens = 0;  // length of its run of <|image_pad|> tokens (= grid.num_llm_tokens(merge))
  std::array<std::uint64_t, 2> content_hash{};  // 128-bit hash of pixels (grid + values)
};

using MultimodalInputs = std::vector<ImageInput>;

}  // namespace fp4serve::engine
