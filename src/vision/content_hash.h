// The 128-bit content hash of a preprocessed image (XXH3-128 over the grid and the fp32 pixel
// values): the engine mixes it into the prefix-cache hashes of the blocks holding the image's
// tokens, so the same image hits and a different one with the same placeholder ids does not.
#pragma once

#include <array>
#include <cstdint>

#include "vision/pixel_patches.h"

namespace fp4serve::vision {

std::array<std::uint64_t, 2> content_hash(const PixelPatches& pixels);

}  // namespace fp4serve::vision
