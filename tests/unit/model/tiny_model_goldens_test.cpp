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
// rounds each dequantized weight to bf16, so their bounds are wider. fp8's p90 bound is 0.33 (0.3
// before the tiny model got its lm_head bigram prior, tools/reference/tiny_model.py, which moved the
// top logit from ~3 to 4.6..9.3, where a bf16 ulp is 1/32..1/16): seen 0.305, while ours vs HF f32
// is 0.198 at p90 and HF bf16's own is 0.216: the distance is HF bf16's rounding plus ours.
//
// Greedy: BF16 continuations must be token-identical to transformers' for all 64 steps of every
// prompt (the prompts are chosen so that is a fair demand, see TinyBf16Greedy);
// quantized ones are compared teacher-forced with a near-tie allowance.
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
  float step_p90_tol;     // the same two for the logits of the first 16 cached decode steps
  float step_worst_tol;
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

float top2_margin(const float* x, int64_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > a) {
      b = a;
      a = x[i];
    } else if (x[i] > b) {
      b = x[i];
    }
  }
  return a - b;
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

// Greedy decoding as a user runs it: prefill, then one token at a time with the cache, each step
// feeding back our own argmax. For BF16 all 64 tokens of every prompt must equal transformers'
// (bf16, as the release runs). That is a fair demand because make_tiny_models.py only accepts golden
// prompts whose every greedy step has a top-2 margin >= 0.35 logits in transformers' bf16 and f32
// runs, and whose bf16 and f32 continuations are identical (tools/reference/greedy_margins.py);
// our logits differ from HF bf16 by ~0.065 (prefill) / ~0.17 (decode steps) at the 90th percentile.
// The margins come from the tiny model's lm_head bigram prior (tools/reference/tiny_model.py), which
// decides most greedy tokens; so the decode path is also compared in logits, not only in argmax
// (DecodeStepLogitsMatchTransformers).
TEST(TinyBf16Greedy, ContinuationsAreTokenIdenticalToTransformers) {
  const char* dir = "tiny-bf16";
  const auto m = load(dir);
  const auto g = testing::Goldens::load(kModels / dir);
  const auto prompts = g.prompts();
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto expected = g.greedy("bf16", p);
    auto st = m->new_sequence(1024);
    auto lg = m->forward({{&st, prompts[p], false}});
    std::vector<int32_t> ours;
    float min_margin = 1e30f;
    for (size_t i = 0; i < expected.size(); ++i) {
      ours.push_back(argmax(lg.data(), m->vocab_size()));
      min_margin = std::min(min_margin, top2_margin(lg.data(), m->vocab_size()));
      lg = m->forward({{&st, std::span<const int32_t>(&ours.back(), 1), false}});
    }
    const auto hf_margins = g.margins("bf16", p);
    std::printf("[%s] prompt %zu: free-running greedy, min top-2 margin ours %.4f, HF bf16 %.4f\n", dir, p,
                min_margin, *std::min_element(hf_margins.begin(), hf_margins.end()));
    EXPECT_EQ(ours, expected) << dir << " prompt " << p;
  }
}

// Quantized formats: teacher-forced along HF's greedy continuation (feed HF's token), because their
// goldens run HF on dequantized weights rounded to bf16, which our quantized kernels do not reproduce
// bit for bit (see the top of this file), and their prompts were not chosen for margins (only
// BF16's were). A step may pick another token only where HF's own top-2 margin is below tie_margin,
// and at least min_agreement of the steps must agree.
struct QuantizedGreedyCase {
  const char* dir;
  double min_agreement;  // fraction of teacher-forced greedy steps that must pick HF's token
  float tie_margin;      // a step may pick another token only where HF's top-2 margin is below this
};

class QuantizedGreedy : public ::testing::TestWithParam<QuantizedGreedyCase> {};

TEST_P(QuantizedGreedy, TeacherForcedStepsPickTransformersToken) {
  const QuantizedGreedyCase fc = GetParam();
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
    std::printf("[%s] prompt %zu: %d/%zu teacher-forced greedy steps pick HF's token (%d near-ties)\n", fc.dir, p,
                same, expected.size(), near_ties);
    total_same += same;
    total += static_cast<int>(expected.size());
  }
  EXPECT_GE(static_cast<double>(total_same) / total, fc.min_agreement);
}

// The decode path (KV cache, GDN recurrent state, one token per step) against transformers' own
// cached decode: HF's logits at the first 16 greedy steps (prompt<i>/bf16/step_logits, row 0 = last
// prefill position). The greedy tokens alone would not catch a decode-path bug that leaves the
// argmax alone. Our decode computes what our prefill does (PrefillSplitIsBitIdentical, chunk 1), but
// HF's cached decode (recurrent GDN kernel) is not its prefill (chunked kernel): prefilling the same
// tokens in one pass moves HF bf16's own step logits by median 0.06 / p90 0.18 / worst 1.29 (bf16),
// p90 0.09-0.20 / worst 0.76-0.84 (quantized), measured on these goldens. We are as far from HF's
// decode as HF's prefill is, so the step tolerances are those figures with headroom.
TEST_P(TinyModelGoldens, DecodeStepLogitsMatchTransformers) {
  const FormatCase fc = GetParam();
  const auto m = load(fc.dir);
  const auto g = testing::Goldens::load(kModels / fc.dir);
  const auto prompts = g.prompts();
  const int64_t V = m->vocab_size();
  std::vector<float> per_step;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto expected = g.greedy("bf16", p);
    const auto ref = g.tensor("prompt" + std::to_string(p) + "/bf16/step_logits");
    const size_t steps = ref.size() / static_cast<size_t>(V);
    auto st = m->new_sequence(1024);
    auto lg = m->forward({{&st, prompts[p], false}});
    for (size_t i = 0; i < steps; ++i) {
      float e = 0.0f;
      for (int64_t v = 0; v < V; ++v) e = std::max(e, std::fabs(lg[v] - ref[i * V + v]));
      per_step.push_back(e);
      lg = m->forward({{&st, std::span<const int32_t>(&expected[i], 1), false}});
    }
  }
  std::vector<float> sorted = per_step;
  std::sort(sorted.begin(), sorted.end());
  const float p90 = sorted[sorted.size() * 9 / 10], worst = sorted.back();
  std::printf("[%s] decode-step max |logit - HF bf16|: median %.4f, p90 %.4f, worst %.4f over %zu steps\n", fc.dir,
              sorted[sorted.size() / 2], p90, worst, sorted.size());
  EXPECT_LE(p90, fc.step_p90_tol);
  EXPECT_LE(worst, fc.step_worst_tol);
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
                         // Seen (prefill p90 / worst; decode-step p90 / worst): bf16 0.066 / 2.27; 0.174 / 1.30,
                         // fp8 0.305 / 1.37; 0.172 / 0.59, nvfp4 0.203 / 2.14; 0.160 / 0.79,
                         // int4 0.227 / 1.16; 0.234 / 0.75.
                         // int4 decode-step worst: one step (prompt 2, step 13) sits on a knife edge: the
                         // avx512_bf16 linear (bf16 products, kernel_table.h) moves it from 0.75 to 1.10,
                         // and merely summing that kernel's 16 fp32 lanes in another order moves it back
                         // to 0.74 (every other step changes by < 0.06). Hence 1.25 for int4, below the
                         // 1.29 HF bf16's own prefill-vs-decode worst.
                         ::testing::Values(FormatCase{"tiny-bf16", 0.07f, 2.5f, 0.2f, 1.5f},
                                           FormatCase{"tiny-fp8", 0.33f, 2.5f, 0.3f, 1.0f},
                                           FormatCase{"tiny-nvfp4", 0.3f, 2.5f, 0.3f, 1.0f},
                                           FormatCase{"tiny-int4", 0.3f, 2.5f, 0.3f, 1.25f}),
                         [](const auto& info) {
                           std::string n = info.param.dir;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Each quantized format's goldens have 256/256 teacher-forced steps agreeing and one step with an
// HF top-2 margin below 0.5 (0.11-0.16): that one may flip, no other.
INSTANTIATE_TEST_SUITE_P(Formats, QuantizedGreedy,
                         ::testing::Values(QuantizedGreedyCase{"tiny-fp8", 0.99, 0.5f},
                                           QuantizedGreedyCase{"tiny-nvfp4", 0.99, 0.5f},
                                           QuantizedGreedyCase{"tiny-int4", 0.99, 0.5f}),
                         [](const auto& info) {
                           std::string n = info.param.dir;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace fp4serve
