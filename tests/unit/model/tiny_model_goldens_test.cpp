// The forward pass against transformers' goldens on the tiny models of tools/reference, one per
// checkpoint format, and the invariances the engine relies on: prefill split anywhere, prefill then
// decode, batch composition and thread count give bit-identical logits.
//
// Tolerances (stated, and why). Our kernels accumulate in fp32 in a fixed order that differs from
// torch's, so a bf16 rounding can land on the other side and flip one bf16 ulp; flips compound over
// layers. Most positions then agree within a few ulps of the logits. A few positions differ by O(1):
// there the MoE router's top-k is a near-tie that one ulp flips (transformers' own bf16 and f32 runs
// disagree by the same O(1) at those positions, see the f32 column printed below). So the test
// bounds the typical position tightly (90th percentile of per-position max error) and the worst
// position loosely. Quantized formats are compared with HF running on the dequantized weights; we
// compute e2m1 * e4m3 exactly and apply the global scale on the fp32 sum (Marlin's order) where HF
// rounds each dequantized weight to bf16, so their bounds are wider.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "goldens.h"
#include "kernels/cpu/thread_pool.h"
#include "model/qwen3_5_moe.h"

namespace fp4serve {
namespace {

const std::filesystem::path kModels = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models";

struct FormatCase {
  const char* dir;
  float p90_tol;          // 90th percentile over positions of max |ours - HF bf16| across the vocabulary
  float worst_tol;        // any position (bounded: one routing flip)
  double min_agreement;   // fraction of teacher-forced greedy steps that must pick HF's token
  float tie_margin;       // a step may pick another token only where HF's top-2 margin is below this
};

std::shared_ptr<model::Qwen35MoeModel> load(const std::string& dir) {
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open((kModels / dir).string()));
  return std::make_shared<model::Qwen35MoeModel>(ck);
}

std::vector<float> prefill_all(const model::Qwen35MoeModel& m, const std::vector<int32_t>& prompt, int64_t chunk) {
  auto st = m.new_sequence(1024);
  std::vector<float> all;
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(chunk)) {
    const size_t n = std::min(prompt.size() - i, static_cast<size_t>(chunk));
    auto lg = m.forward({{&st, std::span<const int32_t>(prompt.data() + i, n), true}});
    all.insert(all.end(), lg.begin(), lg.end());
  }
  return all;
}

int32_t argmax(const float* x, int64_t n) {
  return static_cast<int32_t>(std::max_element(x, x + n) - x);  // first max, as torch.argmax
}

class TinyModelGoldens : public ::testing::TestWithParam<FormatCase> {};

TEST_P(TinyModelGoldens, LogitsMatchTransformers) {
  const FormatCase fc = GetParam();
  const auto m = load(fc.dir);
  const auto g = testing::Goldens::load(kModels / fc.dir);
  const auto prompts = g.prompts();
  const int64_t V = m->vocab_size();
  std::vector<float> per_position, vs_f32, hf_bf16_vs_f32_all;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto ours = prefill_all(*m, prompts[p], 1 << 20);
    const auto ref = g.tensor("prompt" + std::to_string(p) + "/bf16/logits");
    const auto ref32 = g.tensor("prompt" + std::to_string(p) + "/f32/logits");
    ASSERT_EQ(ours.size(), ref.size()) << "prompt " << p;
    for (size_t t = 0; t < prompts[p].size(); ++t) {
      float e = 0.0f, hf_bf16_vs_f32 = 0.0f;
      for (int64_t i = 0; i < V; ++i) {
        e = std::max(e, std::fabs(ours[t * V + i] - ref[t * V + i]));
        hf_bf16_vs_f32 = std::max(hf_bf16_vs_f32, std::fabs(ref[t * V + i] - ref32[t * V + i]));
      }
      per_position.push_back(e);
      float e32 = 0.0f;
      for (int64_t i = 0; i < V; ++i) e32 = std::max(e32, std::fabs(ours[t * V + i] - ref32[t * V + i]));
      vs_f32.push_back(e32);
      hf_bf16_vs_f32_all.push_back(hf_bf16_vs_f32);
      if (e > 4 * fc.p90_tol) {
        std::printf("[%s] prompt %zu position %zu: max |ours - HF bf16| %.3f (HF bf16 vs HF f32: %.3f)\n", fc.dir,
                    p, t, e, hf_bf16_vs_f32);
      }
    }
  }
  std::vector<float> sorted = per_position;
  std::sort(sorted.begin(), sorted.end());
  const float p50 = sorted[sorted.size() / 2], p90 = sorted[sorted.size() * 9 / 10], worst = sorted.back();
  std::printf("[%s] per-position max |logit - HF bf16|: median %.4f, p90 %.4f, worst %.4f over %zu positions\n",
              fc.dir, p50, p90, worst, sorted.size());
  auto pct = [](std::vector<float> v, double q) {
    std::sort(v.begin(), v.end());
    return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
  };
  // The f32 run (exactly dequantized weights, fp32 activations) is the sharper reference: a correct
  // bf16 implementation is as far from it as HF's own bf16 run is.
  std::printf("[%s] vs HF f32: ours p50 %.4f p90 %.4f | HF bf16 p50 %.4f p90 %.4f\n", fc.dir, pct(vs_f32, 0.5),
              pct(vs_f32, 0.9), pct(hf_bf16_vs_f32_all, 0.5), pct(hf_bf16_vs_f32_all, 0.9));
  EXPECT_LE(pct(vs_f32, 0.5), 1.1f * pct(hf_bf16_vs_f32_all, 0.5) + 0.01f);
  EXPECT_LE(pct(vs_f32, 0.9), 1.1f * pct(hf_bf16_vs_f32_all, 0.9) + 0.01f);
  EXPECT_LE(p90, fc.p90_tol);
  EXPECT_LE(worst, fc.worst_tol);
}

// Teacher-forced along HF's greedy continuation: at each of the 64 steps our argmax should be HF's
// token. Token-identical continuations are not a fair demand on this random tiny model: its router
// nearly ties so often that transformers itself (prefill vs cached decode of the same tokens)
// disagrees on 2 of 64 steps (tools/reference/README.md). So a step may differ only where HF's own
// top-2 margin was small, and most steps must agree.
TEST_P(TinyModelGoldens, GreedyContinuationMatches) {
  const FormatCase fc = GetParam();
  const auto m = load(fc.dir);
  const auto g = testing::Goldens::load(kModels / fc.dir);
  const auto prompts = g.prompts();
  int total_same = 0, total = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto expected = g.greedy("bf16", p);
    const auto margins = g.margins("bf16", p);
    auto st = m->new_sequence(1024);
    auto lg = m->forward({{&st, prompts[p], false}});
    int same = 0, near_ties = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      const int32_t ours = argmax(lg.data(), m->vocab_size());
      if (ours == expected[i]) {
        ++same;
      } else {
        ++near_ties;
        EXPECT_LE(margins[i], fc.tie_margin) << fc.dir << " prompt " << p << " step " << i << ": we pick " << ours
                                             << ", HF picks " << expected[i] << " with a top-2 margin of " << margins[i];
      }
      lg = m->forward({{&st, std::span<const int32_t>(&expected[i], 1), false}});
    }
    std::printf("[%s] prompt %zu: %d/%zu greedy steps pick HF's token (%d near-ties)\n", fc.dir, p, same,
                expected.size(), near_ties);
    total_same += same;
    total += static_cast<int>(expected.size());
  }
  EXPECT_GE(static_cast<double>(total_same) / total, fc.min_agreement);
}

TEST_P(TinyModelGoldens, PrefillSplitIsBitIdentical) {
  const auto m = load(GetParam().dir);
  const auto prompt = testing::Goldens::load(kModels / GetParam().dir).prompts().back();
  const auto whole = prefill_all(*m, prompt, 1 << 20);
  for (int64_t chunk : {1, 7, 64, 500}) {
    EXPECT_EQ(prefill_all(*m, prompt, chunk), whole) << "chunk " << chunk;
  }
}

TEST_P(TinyModelGoldens, BatchCompositionAndThreadsDoNotChangeLogits) {
  const auto m = load(GetParam().dir);
  const auto prompts = testing::Goldens::load(kModels / GetParam().dir).prompts();
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) alone.push_back(prefill_all(*m, p, 1 << 20));
  // All prompts in one step.
  std::vector<model::SequenceState> states;
  for (size_t i = 0; i < prompts.size(); ++i) states.push_back(m->new_sequence(1024));
  std::vector<model::StepSequence> step;
  for (size_t i = 0; i < prompts.size(); ++i) step.push_back({&states[i], prompts[i], true});
  const auto batched = m->forward(step);
  size_t off = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<float> part(batched.begin() + off, batched.begin() + off + alone[i].size());
    EXPECT_EQ(part, alone[i]) << "prompt " << i << " in a batch";
    off += alone[i].size();
  }
  const int threads = kernels::cpu::num_threads();
  kernels::cpu::set_num_threads(1);
  const auto one = prefill_all(*m, prompts.back(), 1 << 20);
  kernels::cpu::set_num_threads(threads);
  EXPECT_EQ(one, alone.back()) << "1 thread vs " << threads;
}

INSTANTIATE_TEST_SUITE_P(Formats, TinyModelGoldens,
                         ::testing::Values(FormatCase{"tiny-bf16", 0.07f, 2.5f, 0.9, 0.2f},
                                           FormatCase{"tiny-fp8", 0.3f, 2.5f, 0.85, 0.65f},
                                           FormatCase{"tiny-nvfp4", 0.3f, 2.5f, 0.85, 0.65f},
                                           FormatCase{"tiny-int4", 0.3f, 2.5f, 0.85, 0.65f}),
                         [](const auto& info) {
                           std::string n = info.param.dir;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace fp4serve
