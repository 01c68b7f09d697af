// Preprocessing against transformers' Qwen2VLImageProcessor (torchvision backend, the default):
// pixel_values and image_grid_thw of every golden image, torchvision's uint8 resize alone, and
// smart_resize with Qwen3.6's settings (tools/reference/make_image_goldens.py).
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "unit/vision/npy.h"
#include "vision/content_hash.h"
#include "vision/image_decode.h"
#include "vision/image_error.h"
#include "vision/image_processor.h"
#include "vision/resample.h"

namespace fp4serve::vision {
namespace {

using testing::read_bytes;
using testing::read_npy;

using testing::kDir;
using testing::manifest;

RgbImage load_rgb(const std::string& npy) {
  const auto a = read_npy(kDir + npy);
  RgbImage img;
  img.height = static_cast<int>(a.shape[0]);
  img.width = static_cast<int>(a.shape[1]);
  img.rgb = a.as<std::uint8_t>();
  return img;
}

TEST(ImageProcessor, ConfigReadsPreprocessorConfigJson) {
  const auto m = manifest();
  const auto c = ImageProcessorConfig::from_json(m["qwen36_config"]);
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.temporal_patch_size, 2);
  EXPECT_EQ(c.merge_size, 2);
  EXPECT_EQ(c.min_pixels, 65536);
  EXPECT_EQ(c.max_pixels, 16777216);
  auto j = m["config"];
  j["max_pixels"] = 12345;  // the processor's min_pixels/max_pixels kwargs win over size
  EXPECT_EQ(ImageProcessorConfig::from_json(j).max_pixels, 12345);
  j["image_std"] = {0.5, 0.0, 0.5};
  EXPECT_THROW(ImageProcessorConfig::from_json(j), std::invalid_argument);
}

TEST(ImageProcessor, SmartResizeMatchesTransformersForQwen36) {
  const auto m = manifest();
  const auto c = ImageProcessorConfig::from_json(m["qwen36_config"]);
  ASSERT_GE(m["smart_resize"].size(), 10u);
  for (const auto& k : m["smart_resize"]) {
    SCOPED_TRACE(k.dump());
    if (k.contains("error")) {
      EXPECT_THROW(smart_resize(k["height"], k["width"], c.factor(), c.min_pixels, c.max_pixels), ImageError);
      continue;
    }
    const auto [h, w] = smart_resize(k["height"], k["width"], c.factor(), c.min_pixels, c.max_pixels);
    EXPECT_EQ(h, k["resized"][0].get<int>());
    EXPECT_EQ(w, k["resized"][1].get<int>());
  }
  EXPECT_THROW(smart_resize(1, 201, 32, c.min_pixels, c.max_pixels), ImageError);
}

TEST(ImageProcessor, Uint8ResizeIsTorchvisionsBitForBit) {
  const auto m = manifest();
  ASSERT_GE(m["resize"].size(), 4u);
  for (const auto& r : m["resize"]) {
    SCOPED_TRACE(r["file"].get<std::string>());
    const RgbImage src = load_rgb(r["source"]);
    const RgbImage got = resize_bicubic_antialias(src, r["height"], r["width"]);
    const RgbImage want = load_rgb(r["file"]);
    ASSERT_EQ(got.height, want.height);
    ASSERT_EQ(got.width, want.width);
    std::size_t diff = 0;
    for (std::size_t i = 0; i < want.rgb.size(); ++i) diff += got.rgb[i] != want.rgb[i];
    EXPECT_EQ(diff, 0u);
  }
}

// HF's pixel_values from the decoded golden RGB: equal within float rounding. Measured: max abs
// error 0 (the same fp32 (x - 127.5) / 127.5 on the same uint8 values).
TEST(ImageProcessor, PixelValuesEqualTransformers) {
  const auto m = manifest();
  const auto config = ImageProcessorConfig::from_json(m["config"]);
  float worst = 0;
  for (const auto& img : m["images"]) {
    SCOPED_TRACE(img["name"].get<std::string>());
    const RgbImage rgb = decode_image(read_bytes(kDir + img["file"].get<std::string>()));
    const PixelPatches p = preprocess_image(rgb, config);
    EXPECT_EQ(p.grid.t, img["grid_thw"][0].get<int>());
    EXPECT_EQ(p.grid.h, img["grid_thw"][1].get<int>());
    EXPECT_EQ(p.grid.w, img["grid_thw"][2].get<int>());
    const auto golden = read_npy(kDir + img["name"].get<std::string>() + ".pixel_values.npy");
    ASSERT_EQ(golden.shape.size(), 2u);
    ASSERT_EQ(golden.shape[0], p.grid.num_patches());
    ASSERT_EQ(golden.shape[1], p.patch_dim);
    const auto want = golden.as<float>();
    ASSERT_EQ(want.size(), p.values.size());
    float max_err = 0;
    for (std::size_t i = 0; i < want.size(); ++i) max_err = std::max(max_err, std::abs(want[i] - p.values[i]));
    EXPECT_LE(max_err, 1e-6f);
    worst = std::max(worst, max_err);
  }
  std::printf("pixel_values max abs error vs transformers: %g\n", worst);
}

TEST(ImageProcessor, ContentHashSeparatesImagesAndIsStable) {
  const auto config = ImageProcessorConfig::from_json(manifest()["config"]);
  const auto a = preprocess_image(decode_image(read_bytes(kDir + "rgb_37x53.png")), config);
  const auto b = preprocess_image(decode_image(read_bytes(kDir + "rgb_37x53.png")), config);
  const auto c = preprocess_image(decode_image(read_bytes(kDir + "large_150x200.png")), config);
  EXPECT_EQ(content_hash(a), content_hash(b));
  EXPECT_NE(content_hash(a), content_hash(c));
  auto d = a;
  d.values[7] += 1.0f;
  EXPECT_NE(content_hash(a), content_hash(d));
}

}  // namespace
}  // namespace fp4serve::vision
