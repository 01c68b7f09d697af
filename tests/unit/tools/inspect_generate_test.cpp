// `fp4serve inspect` and `fp4serve generate` as a user runs them, on the tiny reference models.
#include <fstream>
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


TEST(GenerateCli, BatchRunsEveryLineThroughTheEngineWithTheSameTokensAsAlone) {
  const std::string file = ::testing::TempDir() + "/fp4serve_batch_prompts.txt";
  {
    std::ofstream out(file);
    out << "ids: 70,272,78,216\nids: 5,6,7\n\nids: 100,200,300,400,500,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n";
  }
  const std::string tok = std::string(FP4SERVE_SOURCE_DIR) + "/.cache/tokenizers/qwen3.5";
  const auto r = run_fp4serve("generate --model " + kModels + "tiny-bf16 --tokenizer " + tok + " --batch " + file +
                              " -n 6 --ignore-eos --kv-cache-memory 32MiB --max-model-len 128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("CPU KV cache size: "));
  EXPECT_THAT(r.output, HasSubstr("Maximum concurrency for 128 tokens per request"));
  EXPECT_THAT(r.output, HasSubstr("batch: 3 prompts, 29 prompt tokens, 18 generated tokens"));
  // The first line's text is what a lone greedy run decodes to.
  const auto alone = run_fp4serve("generate --model " + kModels + "tiny-bf16 --tokenizer " + tok +
                                  " --prompt-ids 70,272,78,216 -n 6 --ignore-eos");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  // Its second line is the text (the first is the "model: ..." line on stderr). The lone run flushes
  // bytes held back at the end and the engine does not (as vLLM), so the engine's is a prefix.
  const size_t l1 = alone.output.find('\n') + 1;
  const std::string alone_text = alone.output.substr(l1, alone.output.find('\n', l1) - l1);
  const size_t at = r.output.find("[0] (length) ");
  ASSERT_NE(at, std::string::npos);
  const size_t from = at + 13;
  const std::string batch_text = r.output.substr(from, r.output.find('\n', from) - from);
  EXPECT_FALSE(batch_text.empty());
  EXPECT_EQ(alone_text.substr(0, batch_text.size()), batch_text);
}

}  // namespace
}  // namespace fp4serve
