// The per-format decoders behind decode_image() (image_decode.cpp checks the common limits and
// dispatches on the sniffed format). Each checks the header's dimensions with check_dimensions()
// before decoding pixels and throws ImageError on truncated or corrupt data.
#pragma once

#include <cstdint>
#include <span>

#include "vision/image_decode.h"

namespace fp4serve::vision::detail {

void check_dimensions(std::int64_t width, std::int64_t height, const DecodeLimits& limits);

// vLLM's rgba_to_rgb: RGBA pasted with its alpha as the mask over a white RGB image, rounded as
// PIL's paste blends (x * a + bg * (255 - a)) / 255 with its DIV255.
void composite_over_white(const std::uint8_t* rgba, std::size_t pixels, std::uint8_t* rgb);

RgbImage decode_jpeg(std::span<const std::uint8_t> bytes, const DecodeLimits& limits);
RgbImage decode_png(std::span<const std::uint8_t> bytes, const DecodeLimits& limits);
RgbImage decode_webp(std::span<const std::uint8_t> bytes, const DecodeLimits& limits);
RgbImage decode_gif(std::span<const std::uint8_t> bytes, const DecodeLimits& limits);

}  // namespace fp4serve::vision::detail
