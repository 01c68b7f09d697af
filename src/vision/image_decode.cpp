#include "vision/image_decode.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include "vision/codecs.h"
#include "vision/image_error.h"

namespace fp4serve::vision {

namespace detail {

void check_dimensions(std::int64_t width, std::int64_t height, const DecodeLimits& limits) {
  if (width <= 0 || height <= 0) {
    throw ImageError("the image has a zero size (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  }
  if (width > limits.max_dimension || height > limits.max_dimension) {
    throw ImageError("the image is " + std::to_string(width) + "x" + std::to_string(height) +
                     " pixels; a side may be at most " + std::to_string(limits.max_dimension));
  }
  // PIL's Image._decompression_bomb_check text.
  if (width * height > limits.max_pixels) {
    throw ImageError("Image size (" + std::to_string(width * height) + " pixels) exceeds limit of " +
                     std::to_string(limits.max_pixels) + " pixels, could be decompression bomb DOS attack.");
  }
}

void composite_over_white(const std::uint8_t* rgba, std::size_t pixels, std::uint8_t* rgb) {
  for (std::size_t i = 0; i < pixels; ++i) {
    const unsigned a = rgba[4 * i + 3];
    for (int c = 0; c < 3; ++c) {
      const unsigned t = 255u * (255u - a) + rgba[4 * i + c] * a + 128u;
      rgb[3 * i + c] = static_cast<std::uint8_t>(((t >> 8) + t) >> 8);
    }
  }
}

}  // namespace detail

ImageFormat sniff_image_format(std::span<const std::uint8_t> b) {
  auto starts = [&](const char* sig, std::size_t at = 0) {
    const std::size_t n = std::strlen(sig);
    return b.size() >= at + n && std::memcmp(b.data() + at, sig, n) == 0;
  };
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::kJpeg;
  if (starts("\x89PNG\r\n\x1a\n")) return ImageFormat::kPng;
  if (starts("RIFF") && starts("WEBP", 8)) return ImageFormat::kWebp;
  if (starts("GIF87a") || starts("GIF89a")) return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kGif: return "GIF";
    default: return "unknown";
  }
}

ImageFormat format_of_mime(std::string_view mime) {
  std::string m(mime);
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  if (m == "image/jpeg" || m == "image/jpg" || m == "image/pjpeg") return ImageFormat::kJpeg;
  if (m == "image/png" || m == "image/apng") return ImageFormat::kPng;
  if (m == "image/webp") return ImageFormat::kWebp;
  if (m == "image/gif") return ImageFormat::kGif;
  return ImageFormat::kUnknown;
}

RgbImage decode_image(std::span<const std::uint8_t> bytes, const DecodeLimits& limits,
                      std::string_view declared_mime) {
  if (bytes.empty()) throw ImageError("the image is empty (0 bytes)");
  if (bytes.size() > limits.max_encoded_bytes) {
    throw ImageError("the image is " + std::to_string(bytes.size()) + " bytes; at most " +
                     std::to_string(limits.max_encoded_bytes) + " are accepted");
  }
  const ImageFormat format = sniff_image_format(bytes);
  if (format == ImageFormat::kUnknown) {
    // PIL's UnidentifiedImageError, which vLLM passes on as a ValueError.
    throw ImageError("cannot identify image file: the bytes are not a JPEG, PNG, WebP or GIF image");
  }
  const ImageFormat declared = format_of_mime(declared_mime);
  if (declared != ImageFormat::kUnknown && declared != format) {
    throw ImageError("the media type says " + std::string(declared_mime) + " but the bytes are a " +
                     image_format_name(format) + " image");
  }
  switch (format) {
    case ImageFormat::kJpeg: return detail::decode_jpeg(bytes, limits);
    case ImageFormat::kPng: return detail::decode_png(bytes, limits);
    case ImageFormat::kWebp: return detail::decode_webp(bytes, limits);
    case ImageFormat::kGif: return detail::decode_gif(bytes, limits);
    default: break;
  }
  throw ImageError("cannot identify image file");
}

}  // namespace fp4serve::vision
