#include "vision/resample.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "vision/image_error.h"

namespace fp4serve::vision {
namespace {

// Python's round(): half to even.
double py_round(double x) {
  const double r = std::nearbyint(x);  // default rounding mode: to nearest, ties to even
  return r;
}

// ATen's HelperInterpCubic::aa_filter<double> with a = -0.5 (cubic_convolution1/2).
double keys_cubic(double x) {
  constexpr double a = -0.5;
  x = std::abs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
  return 0.0;
}

// One axis: per output index the first input index, the tap count and int16 weights.
struct AxisTaps {
  int max_taps = 0;
  unsigned precision = 0;
  std::vector<int> first;
  std::vector<int> count;
  std::vector<std::int32_t> weights;  // [out][max_taps]
};

AxisTaps axis_taps(int in_size, int out_size) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
  AxisTaps t;
  t.max_taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  std::vector<double> w(static_cast<std::size_t>(out_size) * t.max_taps, 0.0);
  double wt_max = 0.0;
  for (int i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    const std::int64_t xmin = std::max<std::int64_t>(static_cast<std::int64_t>(center - support + 0.5), 0);
    std::int64_t xsize = std::min<std::int64_t>(static_cast<std::int64_t>(center + support + 0.5), in_size) - xmin;
    xsize = std::clamp<std::int64_t>(xsize, 0, t.max_taps);
    double* row = &w[static_cast<std::size_t>(i) * t.max_taps];
    double total = 0.0;
    for (std::int64_t j = 0; j < xsize; ++j) {
      row[j] = keys_cubic((static_cast<double>(j + xmin) - center + 0.5) * invscale);
      total += row[j];
    }
    if (total != 0.0) {
      for (std::int64_t j = 0; j < xsize; ++j) {
        row[j] /= total;
        wt_max = std::max(wt_max, row[j]);
      }
    }
    t.first[i] = static_cast<int>(xmin);
    t.count[i] = static_cast<int>(xsize);
  }
  // The most fraction bits (< 22) at which the largest weight still fits an int16.
  for (t.precision = 0; t.precision < 22; ++t.precision) {
    const int next = static_cast<int>(0.5 + wt_max * (1 << (t.precision + 1)));
    if (next >= (1 << 15)) break;
  }
  t.weights.resize(w.size());
  for (std::size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * (1 << t.precision);
    t.weights[k] = static_cast<std::int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

std::uint8_t fixed_to_u8(std::int32_t acc, unsigned precision) {
  const std::int32_t v = acc >> precision;
  return static_cast<std::uint8_t>(std::clamp(v, 0, 255));
}

RgbImage horizontal(const RgbImage& in, int out_width) {
  const AxisTaps t = axis_taps(in.width, out_width);
  RgbImage out;
  out.width = out_width;
  out.height = in.height;
  out.rgb.resize(static_cast<std::size_t>(out_width) * in.height * 3);
  const std::int32_t half = t.precision > 0 ? (1 << (t.precision - 1)) : 0;
  for (int y = 0; y < in.height; ++y) {
    const std::uint8_t* src = &in.rgb[static_cast<std::size_t>(y) * in.width * 3];
    std::uint8_t* dst = &out.rgb[static_cast<std::size_t>(y) * out_width * 3];
    for (int x = 0; x < out_width; ++x) {
      const std::int32_t* w = &t.weights[static_cast<std::size_t>(x) * t.max_taps];
      for (int c = 0; c < 3; ++c) {
        std::int32_t acc = half;
        for (int j = 0; j < t.count[x]; ++j) acc += src[(t.first[x] + j) * 3 + c] * w[j];
        dst[x * 3 + c] = fixed_to_u8(acc, t.precision);
      }
    }
  }
  return out;
}

RgbImage vertical(const RgbImage& in, int out_height) {
  const AxisTaps t = axis_taps(in.height, out_height);
  RgbImage out;
  out.width = in.width;
  out.height = out_height;
  const std::size_t stride = static_cast<std::size_t>(in.width) * 3;
  out.rgb.resize(stride * out_height);
  const std::int32_t half = t.precision > 0 ? (1 << (t.precision - 1)) : 0;
  std::vector<std::int32_t> acc(stride);
  for (int y = 0; y < out_height; ++y) {
    std::fill(acc.begin(), acc.end(), half);
    const std::int32_t* w = &t.weights[static_cast<std::size_t>(y) * t.max_taps];
    for (int j = 0; j < t.count[y]; ++j) {
      const std::uint8_t* src = &in.rgb[static_cast<std::size_t>(t.first[y] + j) * stride];
      for (std::size_t k = 0; k < stride; ++k) acc[k] += src[k] * w[j];
    }
    std::uint8_t* dst = &out.rgb[static_cast<std::size_t>(y) * stride];
    for (std::size_t k = 0; k < stride; ++k) dst[k] = fixed_to_u8(acc[k], t.precision);
  }
  return out;
}

}  // namespace

std::pair<int, int> smart_resize(int height, int width, int factor, std::int64_t min_pixels,
                                 std::int64_t max_pixels) {
  const double h = height;
  const double w = width;
  if (std::max(h, w) / std::min(h, w) > 200) {
    throw ImageError("absolute aspect ratio must be smaller than 200, got " +
                     std::to_string(std::max(h, w) / std::min(h, w)));
  }
  double h_bar = py_round(h / factor) * factor;
  double w_bar = py_round(w / factor) * factor;
  if (h_bar * w_bar > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt((h * w) / static_cast<double>(max_pixels));
    h_bar = std::max<double>(factor, std::floor(h / beta / factor) * factor);
    w_bar = std::max<double>(factor, std::floor(w / beta / factor) * factor);
  } else if (h_bar * w_bar < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = std::ceil(h * beta / factor) * factor;
    w_bar = std::ceil(w * beta / factor) * factor;
  }
  return {static_cast<int>(h_bar), static_cast<int>(w_bar)};
}

RgbImage resize_bicubic_antialias(const RgbImage& image, int out_height, int out_width) {
  if (out_height <= 0 || out_width <= 0) throw ImageError("the image resizes to an empty size");
  const bool need_h = out_width != image.width;
  const bool need_v = out_height != image.height;
  if (!need_h && !need_v) return image;
  if (!need_v) return horizontal(image, out_width);
  if (!need_h) return vertical(image, out_height);
  return vertical(horizontal(image, out_width), out_height);
}

}  // namespace fp4serve::vision
