// A decoded image as 8-bit RGB, rows top to bottom, pixels interleaved (R, G, B): what PIL's
// Image.convert("RGB") holds, the input of the Qwen image processor.
#pragma once

#include <cstdint>
#include <vector>

namespace fp4serve::vision {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<std::uint8_t> rgb;  // height * width * 3
};

}  // namespace fp4serve::vision
