// RGB images written as PNG and as a `data:image/png;base64,...` URL: what a client sends, for the
// canary's image check and tests (libpng's simplified write API; the server itself only decodes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vision/rgb_image.h"

namespace fp4serve::vision {

// Throws std::runtime_error with libpng's message when the image cannot be written.
std::vector<std::uint8_t> encode_png(const RgbImage& image);

// RFC 4648 base64 with padding (the inverse of decode_base64).
std::string encode_base64(const std::vector<std::uint8_t>& bytes);

std::string png_data_url(const RgbImage& image);

// A width x height image of one colour.
RgbImage solid_image(int width, int height, std::uint8_t r, std::uint8_t g, std::uint8_t b);

}  // namespace fp4serve::vision
