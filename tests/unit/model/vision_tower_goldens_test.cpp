// The vision tower against transformers' Qwen3_5MoeVisionModel on the tiny vision checkpoint
// (tools/reference/make_tiny_vision.py): features of single images and of two images in one call
// (attention confined to each image), on the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_error.h"
#include "kernels/backend.h"
#include "model/vision_loader.h"
#include "model/vision_positions.h"

namespace fp4serve::model {
namespace {

const std::filesystem::path kDir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-vision";

struct VisionGoldens {
  nlohmann::json meta;
  std::string bin;
  static VisionGoldens load() {
    VisionGoldens g;
    std::ifstream js(kDir / "vision_goldens.json");
    g.meta = nlohmann::json::parse(js);
    std::ifstream b(kDir / "vision_goldens.bin", std::ios::binary);
    g.bin.assign(std::istreambuf_iterator<char>(b), {});
    return g;
  }
  std::vector<float> f32(const nlohmann::json& entry) const {
    int64_t n = 1;
    for (auto d : entry.at("shape")) n *= d.get<int64_t>();
    std::vector<float> v(static_cast<size_t>(n));
    std::memcpy(v.data(), bin.data() + entry.at("offset").get<size_t>(), v.size() * 4);
    return v;
  }
  vision::PixelPatches image(size_t i) const {
    const auto& e = meta.at("images").at(i);
    vision::PixelPatches p;
    const auto g = e.at("grid_thw").get<std::vector<int>>();
    p.grid = {g[0], g[1], g[2]};
    p.patch_dim = 3 * 2 * 16 * 16;
    p.values = f32(e.at("pixel_values"));
    return p;
  }
};

struct Err {
  double max_abs = 0, rel_l2 = 0;
};
Err compare(const std::vector<float>& got, const std::vector<float>& want) {
  Err e;
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    e.max_abs = std::max(e.max_abs, std::abs(d));
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  e.rel_l2 = std::sqrt(num / den);
  return e;
}

class VisionTowerGoldens : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    goldens_ = new VisionGoldens(VisionGoldens::load());
    tower_ = load_vision_tower(kDir, kernels::default_backend()).release();
  }
  static void TearDownTestSuite() {
    delete tower_;
    delete goldens_;
  }
  static VisionGoldens* goldens_;
  static VisionTower* tower_;
};
VisionGoldens* VisionTowerGoldens::goldens_ = nullptr;
VisionTower* VisionTowerGoldens::tower_ = nullptr;

// Against HF bf16: a bf16 implementation cannot be bit-identical to torch's (GEMM blocking, SLEEF
// transcendentals, Welford LayerNorm), so the bound is a fraction of HF's own bf16-vs-f32 distance.
TEST_F(VisionTowerGoldens, FeaturesMatchTransformers) {
  ASSERT_NE(tower_, nullptr);
  EXPECT_EQ(tower_->out_hidden(), 256);
  EXPECT_EQ(tower_->spatial_merge_size(), 2);
  for (const auto& c : goldens_->meta.at("cases")) {
    std::vector<vision::PixelPatches> images;
    for (auto i : c.at("images")) images.push_back(goldens_->image(i.get<size_t>()));
    const auto got = tower_->encode_batch(images);
    const auto want = goldens_->f32(c.at("bf16"));
    const auto exact = goldens_->f32(c.at("f32"));
    ASSERT_EQ(got.size(), want.size());
    const Err e = compare(got, want), ef = compare(got, exact), hf = compare(want, exact);
    std::printf("images %s: vs HF bf16 max abs %.4g rel l2 %.3g | vs HF f32 max abs %.4g rel l2 %.3g "
                "(HF bf16 vs f32: max abs %.4g rel l2 %.3g)\n",
                c.at("images").dump().c_str(), e.max_abs, e.rel_l2, ef.max_abs, ef.rel_l2, hf.max_abs, hf.rel_l2);
    EXPECT_LT(e.rel_l2, 0.5 * hf.rel_l2);
    EXPECT_LT(e.max_abs, 0.5 * hf.max_abs);
    // And no further from exact than HF's bf16 run is, with margin.
    EXPECT_LT(ef.rel_l2, 1.5 * hf.rel_l2);
  }
}

// Two images in one call give each image the rows it gets alone: attention never crosses images.
TEST_F(VisionTowerGoldens, BatchedImagesAreIndependent) {
  const auto a = goldens_->image(0), b = goldens_->image(1);
  const auto ab = tower_->encode_batch(std::vector{a, b});
  auto only_a = tower_->encode(a), only_b = tower_->encode(b);
  only_a.insert(only_a.end(), only_b.begin(), only_b.end());
  const Err e = compare(ab, only_a);
  // Same bits for attention and every row-wise op; only the linears' batch size differs.
  EXPECT_LT(e.max_abs, 0.02);
}

TEST_F(VisionTowerGoldens, RejectsPatchesThatDoNotFit) {
  auto im = goldens_->image(1);
  auto bad = im;
  bad.values.pop_back();
  EXPECT_THROW(tower_->encode(bad), std::invalid_argument);
  bad = im;
  bad.grid.w = 7;  // not whole merge blocks
  EXPECT_THROW(tower_->encode(bad), std::invalid_argument);
  bad = im;
  bad.patch_dim = 768;
  EXPECT_THROW(tower_->encode(bad), std::invalid_argument);
}

TEST(VisionPositions, LinspaceMatchesTorchEndpoints) {
  EXPECT_EQ(torch_linspace_f32(0.0f, 47.0f, 64, 0), 0.0f);
  EXPECT_EQ(torch_linspace_f32(0.0f, 47.0f, 64, 63), 47.0f);
  EXPECT_EQ(torch_linspace_f32(0.0f, 7.0f, 1, 0), 0.0f);
  // (row, col) in merge-block order: the first block is (0,0) (0,1) (1,0) (1,1).
  const auto pos = vision_patch_positions({1, 4, 4}, 2);
  const std::vector<int32_t> first{0, 0, 0, 1, 1, 0, 1, 1, 0, 2};
  EXPECT_EQ(std::vector<int32_t>(pos.begin(), pos.begin() + 10), first);
}

TEST(VisionLoader, NothingToLoad) {
  EXPECT_EQ(load_vision_tower(kDir, kernels::default_backend(), {.skip = true}), nullptr);
}

}  // namespace
}  // namespace fp4serve::model
