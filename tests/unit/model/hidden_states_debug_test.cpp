// Layer-by-layer agreement with transformers' output_hidden_states on the tiny BF16 model: the
// residual stream after the embedding and after each layer. When the logits test fails this one
// says which layer (and so which op) drifted.
#include <gtest/gtest.h>

#include <cmath>

#include "goldens.h"
#include "model/qwen3_5_moe.h"
#include "tensor/float_formats.h"

namespace fp4serve {
namespace {

TEST(TinyModelHiddenStates, EveryLayerTracksTransformers) {
  const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
  model::Qwen35MoeModel m(ck);
  const auto g = testing::Goldens::load(dir);
  const size_t p = g.meta.at("hidden_prompt_index").get<size_t>();
  const auto prompt = g.prompts().at(p);
  const auto ref = g.tensor("prompt" + std::to_string(p) + "/bf16/hidden_states");
  auto st = m.new_sequence(1024);
  std::vector<std::vector<uint16_t>> hs;
  m.forward({{&st, prompt, true}}, &hs);
  const size_t per_layer = prompt.size() * static_cast<size_t>(m.config().hidden_size);
  ASSERT_EQ(ref.size(), hs.size() * per_layer);
  for (size_t l = 0; l < hs.size(); ++l) {
    float worst = 0, scale = 0;
    for (size_t i = 0; i < per_layer; ++i) {
      worst = std::max(worst, std::fabs(bf16_to_f32(hs[l][i]) - ref[l * per_layer + i]));
      scale = std::max(scale, std::fabs(ref[l * per_layer + i]));
    }
    std::printf("hidden state %zu: max abs diff %.5f (max |value| %.3f)\n", l, worst, scale);
    EXPECT_LE(worst, 0.02f * std::max(1.0f, scale)) << "after layer " << l;
  }
}

}  // namespace
}  // namespace fp4serve
