// `fp4serve inspect` and `fp4serve generate` as a user runs them, on the tiny reference models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "cli_test_util.h"
#include "checkpoint/weight_loader.h"
#include "model/qwen3_5_moe.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using testing::run_fp4serve;

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";

TEST(InspectCli, Nvfp4TinyModel) {
  const auto r = run_fp4serve("inspect " + kModels + "tiny-nvfp4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("LLLF"));
  EXPECT_THAT(r.output, HasSubstr("MIXED_PRECISION"));
  EXPECT_THAT(r.output, HasSubstr("nvfp4_w4a16_g16"));
  EXPECT_THAT(r.output, HasSubstr("kv cache: fp8_e4m3"));
  // 1 attention layer x K,V x 2 kv heads x 64 dims x 2 bytes
  EXPECT_THAT(r.output, HasSubstr("KV bytes per token: bf16 512, fp8 256"));
  // 3 GDN layers x (8 x 32 x 32 x 4 + (2*128+256) x 3 x 2)
  EXPECT_THAT(r.output, HasSubstr("GDN state bytes per sequence: 107520"));
  EXPECT_THAT(r.output, HasSubstr("active bytes per token: "));
}

TEST(InspectCli, MissingModelSaysWhereItLooked) {
  const auto r = run_fp4serve("inspect no-such-org/no-such-model");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("no-such-org/no-such-model"));
  EXPECT_THAT(r.output, HasSubstr("models--no-such-org--no-such-model"));
}

std::vector<int32_t> model_greedy(const std::string& dir, const std::vector<int32_t>& prompt, int n) {
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir));
  model::Qwen35MoeModel m(ck);
  auto st = m.new_sequence(static_cast<int64_t>(prompt.size()) + n);
  auto lg = m.forward({{&st, prompt, false}});
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin()));
    if (i + 1 < n) lg = m.forward({{&st, std::span<const int32_t>(&out.back(), 1), false}});
  }
  return out;
}

TEST(GenerateCli, GreedyIdsEqualTheModelsAndTokensPerSecondIsPrinted) {
  const auto r = run_fp4serve("generate --model " + kModels + "tiny-bf16 --prompt-ids 70,272,78,216 -n 12 --ignore-eos");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto expected = model_greedy(kModels + "tiny-bf16", {70, 272, 78, 216}, 12);
  std::string ids;
  for (size_t i = 0; i < expected.size(); ++i) ids += (i ? " " : "") + std::to_string(expected[i]);
  EXPECT_THAT(r.output, HasSubstr(ids));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("prefill: 4 tokens in .* tok/s\\); decode: 11 tokens in .* tok/s"));
}

TEST(GenerateCli, EveryFormatRuns) {
  for (const char* f : {"tiny-fp8", "tiny-nvfp4", "tiny-int4"}) {
    const auto r = run_fp4serve(std::string("generate --model ") + kModels + f + " --prompt-ids 1,2,3 -n 4 --ignore-eos --kv-cache-dtype fp8");
    EXPECT_EQ(r.exit_code, 0) << f << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("decode: 3 tokens")) << f;
  }
}

TEST(GenerateCli, BadInputIsRefusedWithAReason) {
  auto r = run_fp4serve("generate --model " + kModels + "tiny-bf16 --prompt hello");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("no tokenizer.json"));
  r = run_fp4serve("generate --model " + kModels + "tiny-bf16 --prompt-ids 1,99999");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("token id 99999 is outside the model's vocabulary of 512"));
  r = run_fp4serve("generate --model " + kModels + "tiny-bf16 --prompt-ids 1,x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("'x' is not a token id"));
}

}  // namespace
}  // namespace fp4serve
