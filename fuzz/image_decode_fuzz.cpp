// libFuzzer target: any byte string given to decode_image (JPEG, PNG, WebP, GIF through Debian's
// codecs) must either decode to an RGB image of the size it reports, within the limits, or be
// refused with an ImageError; a decoded image then preprocesses (Qwen's resize + patchify) to the
// grid smart_resize gives. Anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "vision/image_decode.h"
#include "vision/image_error.h"
#include "vision/image_processor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fp4serve::vision;
  DecodeLimits limits;
  limits.max_pixels = 1 << 20;  // keeps each run fast; the checks are the same at any limit
  limits.max_dimension = 4096;
  try {
    const RgbImage img = decode_image(std::span<const std::uint8_t>(data, size), limits);
    if (img.width <= 0 || img.height <= 0 || img.width > limits.max_dimension || img.height > limits.max_dimension) std::abort();
    if (static_cast<std::int64_t>(img.width) * img.height > limits.max_pixels) std::abort();
    if (img.rgb.size() != static_cast<std::size_t>(img.width) * img.height * 3) std::abort();
    ImageProcessorConfig config;
    config.min_pixels = 32 * 32;
    config.max_pixels = 128 * 128;
    const PixelPatches p = preprocess_image(img, config);
    if (p.values.size() != static_cast<std::size_t>(p.grid.num_patches()) * p.patch_dim) std::abort();
  } catch (const ImageError&) {
    // Refused with a message: the expected outcome for most inputs.
  }
  return 0;
}
