// The CPU sampling op's processors on their own: vLLM's penalty formulas and the bad-words prefix
// match (v1/sample/ops/bad_words.py). Moved here with the stages from the engine's sampler tests.
#include "kernels/cpu/sampling_processors.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/sampling_bad_words.h"

namespace fp4serve::kernels::cpu {
namespace {

// The penalties stage reads the op's options, which carry SamplingParams' penalty fields under the
// same names; the alias keeps the test as it was written against the engine's params.
using SamplingParams = SamplingOptions;

TEST(SamplerPenalties, MatchVllmFormulas) {
  // vLLM apply_penalties: repetition on prompt|output (x > 0 ? x / r : x * r), then
  // x -= frequency * count_in_output, then x -= presence * (count_in_output > 0).
  std::vector<float> row{2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  const std::vector<float> raw = row;
  SamplingParams p;
  p.repetition_penalty = 2.0;
  p.frequency_penalty = 0.5;
  p.presence_penalty = 0.25;
  const std::vector<int32_t> prompt{0, 1, 0};
  const std::vector<int32_t> output{3, 3, 4};
  PenaltyScratch scratch;
  LogitsEditLog log;
  apply_penalties(row, p, prompt, output, scratch, log);
  EXPECT_FLOAT_EQ(row[0], 1.0f);                         // prompt only: 2 / 2
  EXPECT_FLOAT_EQ(row[1], -2.0f);                        // prompt only: -1 * 2
  EXPECT_FLOAT_EQ(row[2], 0.5f);                         // untouched
  EXPECT_FLOAT_EQ(row[3], 3.0f / 2 - 0.5f * 2 - 0.25f);  // output twice
  EXPECT_FLOAT_EQ(row[4], -2.0f * 2 - 0.5f - 0.25f);     // output once, negative
  EXPECT_FLOAT_EQ(row[5], 1.0f);
  log.undo(row);
  EXPECT_EQ(row, raw);
  // The scratch is left clean for the next call: the same call again gives the same result.
  apply_penalties(row, p, prompt, output, scratch, log);
  EXPECT_FLOAT_EQ(row[3], 3.0f / 2 - 0.5f * 2 - 0.25f);
  log.undo(row);

  // Presence and frequency ignore the prompt; repetition < 1 rewards repeats.
  SamplingParams q;
  q.presence_penalty = -1.0;
  q.repetition_penalty = 0.5;
  apply_penalties(row, q, prompt, output, scratch, log);
  EXPECT_FLOAT_EQ(row[0], 4.0f);
  EXPECT_FLOAT_EQ(row[1], -0.5f);
  EXPECT_FLOAT_EQ(row[3], 6.0f + 1.0f);
  EXPECT_FLOAT_EQ(row[4], -1.0f + 1.0f);
  log.undo(row);
  EXPECT_EQ(row, raw);
}

TEST(BadWordsMatch, LastTokenBannedOnlyAfterTheRestOfTheWord) {
  const std::vector<std::vector<int32_t>> words{{7}, {3, 4, 5}, {9, 9}};
  EXPECT_EQ(banned_next_tokens(words, std::vector<int32_t>{}), (std::vector<int32_t>{7}));
  EXPECT_EQ(banned_next_tokens(words, std::vector<int32_t>{1, 3, 4}), (std::vector<int32_t>{7, 5}));
  EXPECT_EQ(banned_next_tokens(words, std::vector<int32_t>{3, 4, 1}), (std::vector<int32_t>{7}));
  EXPECT_EQ(banned_next_tokens(words, std::vector<int32_t>{9}), (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(banned_next_tokens(words, std::vector<int32_t>{4}), (std::vector<int32_t>{7}));
}

}  // namespace
}  // namespace fp4serve::kernels::cpu
