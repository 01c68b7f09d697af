// Pixels -> the checkpoint's vision tower -> the language model, against transformers end to end:
// tiny-bf16 carries a 1-block tower (patch 8), and tools/reference/make_mm_goldens.py ran HF's
// Qwen3_5MoeForConditionalGeneration on seeded pixel values (tiny_mm_tower_goldens). The tower's
// own goldens are h-vision-tower's (vision_tower_goldens_test); this checks the whole chain and
// prints both errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "goldens.h"
#include "kernels/backend.h"
#include "model/mrope_positions.h"
#include "model/qwen3_5_moe.h"
#include "model/vision_loader.h"

namespace fp4serve {
namespace {

const std::filesystem::path kData = std::filesystem::path(FP4SERVE_TEST_DATA_DIR);

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float e = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) e = std::max(e, std::abs(a[i] - b[i]));
  return e;
}

TEST(MultimodalTower, ImageTextLogitsMatchTransformersEndToEnd) {
  const auto dir = kData / "models" / "tiny-bf16";
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
  const model::Qwen35MoeModel m(ck);
  auto tower = model::load_vision_tower(ck, kernels::default_backend());
  ASSERT_TRUE(tower) << "tiny-bf16 has a vision tower";
  const auto g = testing::Goldens::load(kData / "mrope", "tiny_mm_tower_goldens");
  const int merge = g.meta.at("spatial_merge_size");
  const int64_t V = m.vocab_size(), H = m.config().hidden_size;
  for (size_t p = 0; p < g.meta.at("prompts").size(); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const auto& j = g.meta.at("prompts").at(p);
    const auto tokens = j.at("tokens").get<std::vector<int32_t>>();
    std::vector<model::MropeImage> images;
    std::vector<std::vector<float>> feats;
    float feat_err = 0, feat_scale = 0;
    for (size_t i = 0; i < j.at("images").size(); ++i) {
      const auto& im = j.at("images").at(i);
      const std::string key = "prompt" + std::to_string(p) + "/image" + std::to_string(i);
      vision::PixelPatches px;
      px.grid = {im.at("grid_thw").at(0), im.at("grid_thw").at(1), im.at("grid_thw").at(2)};
      px.values = g.tensor(key + "/pixel_values");
      px.patch_dim = static_cast<int>(px.values.size() / static_cast<size_t>(px.grid.num_patches()));
      feats.push_back(tower->encode(px));
      const auto want = g.tensor(key + "/features");
      ASSERT_EQ(feats.back().size(), want.size());
      feat_err = std::max(feat_err, max_abs_diff(feats.back(), want));
      for (float v : want) feat_scale = std::max(feat_scale, std::abs(v));
      model::MropeImage mi;
      mi.offset = im.at("offset");
      mi.frames = px.grid.t;
      mi.rows = px.grid.h / merge;
      mi.cols = px.grid.w / merge;
      images.push_back(mi);
    }
    model::place_mrope_images(images);
    std::vector<model::EmbeddingRows> rows;
    for (size_t i = 0; i < images.size(); ++i) rows.push_back({images[i].offset, images[i].num_tokens(), feats[i].data()});
    auto st = m.new_sequence(128);
    std::vector<float> logits = m.forward({{&st, tokens, true, rows, images}});
    const auto want = g.tensor("prompt" + std::to_string(p) + "/logits");
    ASSERT_EQ(logits.size(), want.size());
    std::vector<float> per_row;
    for (size_t r = 0; r < tokens.size(); ++r) {
      float e = 0;
      for (int64_t v = 0; v < V; ++v)
        e = std::max(e, std::abs(logits[r * static_cast<size_t>(V) + static_cast<size_t>(v)] -
                                 want[r * static_cast<size_t>(V) + static_cast<size_t>(v)]));
      per_row.push_back(e);
    }
    std::sort(per_row.begin(), per_row.end());
    const float p90 = per_row[(per_row.size() - 1) * 9 / 10], worst = per_row.back();
    // Greedy continuation, each step's row against HF's.
    const auto want_greedy = j.at("greedy_tokens").get<std::vector<int32_t>>();
    const auto want_steps = g.tensor("prompt" + std::to_string(p) + "/step_logits");
    std::vector<int32_t> greedy;
    std::vector<float> last(logits.end() - V, logits.end());
    float step_worst = 0;
    for (size_t s = 0; s < want_greedy.size(); ++s) {
      step_worst = std::max(step_worst, max_abs_diff(last, std::vector<float>(want_steps.begin() + static_cast<int64_t>(s) * V,
                                                                               want_steps.begin() + static_cast<int64_t>(s + 1) * V)));
      const auto tok = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
      greedy.push_back(tok);
      const std::vector<int32_t> next{tok};
      last = m.forward({{&st, next, false, {}, images}});
    }
    std::printf("prompt %zu: tower features vs HF max %.5f (of |f| <= %.3f); logits p90 %.4f max %.4f; decode max %.4f\n",
                p, feat_err, feat_scale, p90, worst, step_worst);
    EXPECT_LE(feat_err, 0.02f * std::max(1.0f, feat_scale));
    EXPECT_LE(p90, 0.07f);
    EXPECT_LE(worst, 0.5f);
    EXPECT_LE(step_worst, 0.5f);
    EXPECT_EQ(greedy, want_greedy);
    (void)H;
  }
}

// serve loads the tower whenever the checkpoint has one: every tiny checkpoint (quantized ones keep
// the tower in BF16, as the releases do) must load it, or serve could not start on them.
TEST(MultimodalTower, EveryTinyCheckpointLoadsItsTower) {
  for (const char* name : {"tiny-bf16", "tiny-fp8", "tiny-nvfp4", "tiny-int4"}) {
    SCOPED_TRACE(name);
    auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open((kData / "models" / name).string()));
    std::unique_ptr<model::VisionTower> tower;
    EXPECT_NO_THROW(tower = model::load_vision_tower(ck, kernels::default_backend()));
    if (tower) EXPECT_EQ(tower->out_hidden(), ck->config().hidden_size);
  }
}

}  // namespace
}  // namespace fp4serve
