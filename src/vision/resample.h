// The image resize of transformers' Qwen2VLImageProcessor (torchvision backend, the default):
// smart_resize picks the size, and torchvision's resize(BICUBIC, antialias=True) on a uint8 image
// resamples it on the CPU with ATen's uint8 kernel [torch: aten/src/ATen/native/cpu/
// UpSampleKernel.cpp _compute_index_ranges_int16_weights, UpSampleKernelAVXAntialias.h]: PIL's
// separable filter (Keys cubic a = -0.5, support scaled by the downscale factor, weights normalized
// per output sample), horizontal pass then vertical through a uint8 intermediate, each pass skipped
// when its size is unchanged. Unlike PIL's fixed 22 fraction bits, the weights are int16 at the
// largest precision that fits the axis's largest weight, so ~1% of pixels differ from PIL by one.
#pragma once

#include <cstdint>
#include <utility>

#include "vision/rgb_image.h"

namespace fp4serve::vision {

// transformers' smart_resize: (height, width) multiples of `factor` with min_pixels <= h*w <=
// max_pixels, the aspect ratio kept as closely as possible. Throws ImageError for an aspect ratio
// over 200 (transformers' ValueError).
std::pair<int, int> smart_resize(int height, int width, int factor, std::int64_t min_pixels,
                                 std::int64_t max_pixels);

// Bicubic antialiased resize of RGB8, bit-exact with torchvision's CPU uint8 path.
RgbImage resize_bicubic_antialias(const RgbImage& image, int out_height, int out_width);

}  // namespace fp4serve::vision
