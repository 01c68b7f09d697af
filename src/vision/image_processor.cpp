#include "vision/image_processor.h"

#include <stdexcept>

#include "vision/image_error.h"
#include "vision/resample.h"

namespace fp4serve::vision {
namespace {

std::int64_t positive_int(const nlohmann::json& j, const char* key, std::int64_t fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  if (!j[key].is_number_integer() || j[key].get<std::int64_t>() <= 0) {
    throw std::invalid_argument(std::string("preprocessor_config.json: ") + key + " must be a positive integer");
  }
  return j[key].get<std::int64_t>();
}

std::array<double, 3> triple(const nlohmann::json& j, const char* key, std::array<double, 3> fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const auto& v = j[key];
  if (v.is_number()) return {v.get<double>(), v.get<double>(), v.get<double>()};
  if (!v.is_array() || v.size() != 3 || !v[0].is_number() || !v[1].is_number() || !v[2].is_number()) {
    throw std::invalid_argument(std::string("preprocessor_config.json: ") + key + " must be 3 numbers");
  }
  return {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
}

}  // namespace

ImageProcessorConfig ImageProcessorConfig::from_json(const nlohmann::json& j) {
  ImageProcessorConfig c;
  if (!j.is_object()) throw std::invalid_argument("preprocessor_config.json is not an object");
  c.patch_size = static_cast<int>(positive_int(j, "patch_size", c.patch_size));
  c.temporal_patch_size = static_cast<int>(positive_int(j, "temporal_patch_size", c.temporal_patch_size));
  c.merge_size = static_cast<int>(positive_int(j, "merge_size", c.merge_size));
  if (j.contains("size") && j["size"].is_object()) {
    c.min_pixels = positive_int(j["size"], "shortest_edge", c.min_pixels);
    c.max_pixels = positive_int(j["size"], "longest_edge", c.max_pixels);
  }
  c.min_pixels = positive_int(j, "min_pixels", c.min_pixels);
  c.max_pixels = positive_int(j, "max_pixels", c.max_pixels);
  if (j.contains("rescale_factor") && j["rescale_factor"].is_number()) c.rescale_factor = j["rescale_factor"].get<double>();
  c.image_mean = triple(j, "image_mean", c.image_mean);
  c.image_std = triple(j, "image_std", c.image_std);
  if (c.rescale_factor <= 0) throw std::invalid_argument("preprocessor_config.json: rescale_factor must be positive");
  for (double s : c.image_std) {
    if (s == 0) throw std::invalid_argument("preprocessor_config.json: image_std must not be 0");
  }
  if (c.patch_size > 1024 || c.merge_size > 64 || c.temporal_patch_size > 64) {
    throw std::invalid_argument("preprocessor_config.json: patch sizes out of range");
  }
  return c;
}

ImageGrid image_grid_for(int height, int width, const ImageProcessorConfig& config) {
  const auto [h, w] = smart_resize(height, width, config.factor(), config.min_pixels, config.max_pixels);
  if (h <= 0 || w <= 0) throw ImageError("the image resizes to an empty size");
  return ImageGrid{1, h / config.patch_size, w / config.patch_size};
}

PixelPatches preprocess_image(const RgbImage& image, const ImageProcessorConfig& config) {
  const ImageGrid grid = image_grid_for(image.height, image.width, config);
  const int p = config.patch_size;
  const int m = config.merge_size;
  const int tp = config.temporal_patch_size;
  const RgbImage resized = resize_bicubic_antialias(image, grid.h * p, grid.w * p);

  // The backend fuses rescale into normalize: mean and std are fp32 tensors times 1/rescale_factor,
  // then (x - mean) / std in fp32 [transformers: image_processing_backends.py
  // _fuse_mean_std_and_rescale_factor].
  const double inv_rescale = 1.0 / config.rescale_factor;
  // Each uint8 value maps to one float per channel: a table, computed exactly as the tensor op.
  float table[3][256];
  for (int c = 0; c < 3; ++c) {
    const float mean = static_cast<float>(config.image_mean[c]) * static_cast<float>(inv_rescale);
    const float std_ = static_cast<float>(config.image_std[c]) * static_cast<float>(inv_rescale);
    for (int v = 0; v < 256; ++v) table[c][v] = (static_cast<float>(v) - mean) / std_;
  }

  PixelPatches out;
  out.grid = grid;
  out.patch_dim = 3 * tp * p * p;
  out.values.resize(static_cast<std::size_t>(grid.num_patches()) * out.patch_dim);
  // HF: (C, gh/m, m, p, gw/m, m, p) permuted to (gh/m, gw/m, m, m, C, [T], p, p).
  float* dst = out.values.data();
  const std::size_t stride = static_cast<std::size_t>(resized.width) * 3;
  for (int bh = 0; bh < grid.h / m; ++bh) {
    for (int bw = 0; bw < grid.w / m; ++bw) {
      for (int mh = 0; mh < m; ++mh) {
        for (int mw = 0; mw < m; ++mw) {
          const int y0 = (bh * m + mh) * p;
          const int x0 = (bw * m + mw) * p;
          for (int c = 0; c < 3; ++c) {
            for (int t = 0; t < tp; ++t) {
              for (int y = 0; y < p; ++y) {
                const std::uint8_t* row = &resized.rgb[static_cast<std::size_t>(y0 + y) * stride];
                for (int x = 0; x < p; ++x) *dst++ = table[c][row[(x0 + x) * 3 + c]];
              }
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace fp4serve::vision
