// Encoded image bytes -> RGB8, with Debian's codecs (libjpeg-turbo, libpng, libwebp, giflib), the
// way vLLM loads an image [vllm: multimodal/media/image.py ImageMediaIO.load_bytes]: PIL opens the
// bytes by their content, takes a GIF's or animated WebP's first frame, and converts to RGB; an RGBA
// image is composited over white (vLLM's rgba_background_color default), other alpha (LA, palette
// transparency) is dropped as PIL's convert("RGB") drops it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "vision/rgb_image.h"

namespace fp4serve::vision {

enum class ImageFormat { kUnknown, kJpeg, kPng, kWebp, kGif };

struct DecodeLimits {
  std::size_t max_encoded_bytes = 64u << 20;
  // PIL's decompression-bomb guard: Image.MAX_IMAGE_PIXELS (89478485) warns, twice that raises.
  // Checked against the header's dimensions before any pixel is decoded.
  std::int64_t max_pixels = 2 * 89478485LL;
  int max_dimension = 65535;  // per side
};

// The format the bytes' signature names (PIL opens by content, not by the declared type).
ImageFormat sniff_image_format(std::span<const std::uint8_t> bytes);
const char* image_format_name(ImageFormat format);
// The format a MIME type names; kUnknown for a type that names none (application/octet-stream, "").
ImageFormat format_of_mime(std::string_view mime);

// Throws ImageError saying why (empty, unsupported format, a MIME type naming another format,
// over a limit, truncated or corrupt data).
RgbImage decode_image(std::span<const std::uint8_t> bytes, const DecodeLimits& limits = {},
                      std::string_view declared_mime = {});

}  // namespace fp4serve::vision
