// Prompt logprobs through the engine: each prompt token scored by the logits row of the position
// before it (the prefill's own rows, raw logprobs as for sampled tokens), against our model's
// full-prompt logits and transformers' goldens; and the same numbers whatever the chunking, the
// batch around the request, the sink's row blocks or the prefix cache (which such requests do not
// read, but fill).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/engine.h"
#include "unit/engine/engine_model_util.h"
#include "unit/model/goldens.h"

namespace fp4serve::engine {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::qwen_tokenizer;
using testing::small_engine_config;
using testing::tiny_model;

EngineRequest prompt_logprobs_request(std::string id, std::vector<int32_t> prompt, int64_t num_top,
                                      int max_tokens = 1) {
  EngineRequest r = greedy_request(std::move(id), std::move(prompt), max_tokens);
  r.params.prompt_logprobs = num_top;
  return r;
}

// log_softmax of one row in double (a reference independent of engine/logprobs.cpp).
std::vector<double> log_softmax(const float* row, int64_t n) {
  const double m = *std::max_element(row, row + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(row[i]) - m);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(row[i]) - m - std::log(sum);
  return out;
}

void expect_same(const PromptLogprobs& a, const PromptLogprobs& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].has_value(), b[i].has_value()) << what << " position " << i;
    if (!a[i]) continue;
    EXPECT_EQ(a[i]->sampled.token, b[i]->sampled.token) << what << " position " << i;
    EXPECT_EQ(a[i]->sampled.logprob, b[i]->sampled.logprob) << what << " position " << i;  // bit-identical
    EXPECT_EQ(a[i]->sampled_rank, b[i]->sampled_rank) << what << " position " << i;
    ASSERT_EQ(a[i]->top.size(), b[i]->top.size()) << what << " position " << i;
    for (size_t k = 0; k < a[i]->top.size(); ++k) {
      EXPECT_EQ(a[i]->top[k].token, b[i]->top[k].token) << what << " position " << i;
      EXPECT_EQ(a[i]->top[k].logprob, b[i]->top[k].logprob) << what << " position " << i;
    }
  }
}

TEST(PromptLogprobs, EachTokenIsScoredByThePreviousRow) {
  const auto model = tiny_model();
  const auto goldens = fp4serve::testing::Goldens::load(std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16");
  const std::vector<int32_t> prompt = goldens.prompts().at(3);  // 100 tokens: two sink blocks
  ASSERT_GT(prompt.size(), 64u);
  Engine engine(model, qwen_tokenizer(), small_engine_config());
  const auto f = collect(*engine.submit(prompt_logprobs_request("r", prompt, 5)));
  ASSERT_TRUE(f.prompt_logprobs[0]);
  const PromptLogprobs& got = *f.prompt_logprobs[0];
  ASSERT_EQ(got.size(), prompt.size());
  EXPECT_FALSE(got[0]) << "nothing scores the first token";

  // Our model's rows for the whole prompt at once.
  auto state = model->new_sequence(static_cast<int64_t>(prompt.size()) + 1);
  const std::vector<float> rows = model->forward({{&state, prompt, true}});
  const std::vector<float> hf = goldens.tensor("prompt3/bf16/logits");
  const int64_t V = model->vocab_size();
  std::vector<double> vs_hf;
  for (size_t i = 1; i < prompt.size(); ++i) {
    ASSERT_TRUE(got[i]) << i;
    const SampleLogprobs& lp = *got[i];
    const float* row = rows.data() + (i - 1) * static_cast<size_t>(V);
    const std::vector<double> ref = log_softmax(row, V);
    const auto tok = static_cast<size_t>(prompt[i]);
    EXPECT_EQ(lp.sampled.token, prompt[i]);
    EXPECT_NEAR(lp.sampled.logprob, ref[tok], 2e-6) << "position " << i;
    EXPECT_EQ(lp.sampled_rank, std::count_if(row, row + V, [&](float x) { return x >= row[tok]; })) << i;
    // Top 5 by logit, lower id first among equals.
    std::vector<int32_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    ASSERT_EQ(lp.top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(lp.top[k].token, order[k]) << "position " << i << " rank " << k + 1;
      EXPECT_NEAR(lp.top[k].logprob, ref[static_cast<size_t>(order[k])], 2e-6);
    }
    vs_hf.push_back(std::fabs(lp.sampled.logprob - log_softmax(hf.data() + (i - 1) * static_cast<size_t>(V), V)[tok]));
  }
  // Against transformers' bf16 logits: our logits are within 0.07 at p90 (tiny_model_goldens_test),
  // a logprob moves by at most twice its row's logit error.
  std::sort(vs_hf.begin(), vs_hf.end());
  std::printf("prompt logprobs vs HF bf16: median %.4f p90 %.4f worst %.4f\n", vs_hf[vs_hf.size() / 2],
              vs_hf[vs_hf.size() * 9 / 10], vs_hf.back());
  EXPECT_LE(vs_hf[vs_hf.size() * 9 / 10], 0.14);
  EXPECT_LE(vs_hf.back(), 5.0);
}

TEST(PromptLogprobs, SameWhateverTheChunkingTheBatchAndThePrefixCache) {
  const auto model = tiny_model();
  std::mt19937 rng(7);
  const std::vector<int32_t> prompt = testing::random_prompt(rng, 150);  // > 2 sink blocks in one chunk

  Engine alone(model, qwen_tokenizer(), small_engine_config());
  const auto ref = collect(*alone.submit(prompt_logprobs_request("ref", prompt, 3, 4)));
  ASSERT_TRUE(ref.prompt_logprobs[0]);
  EXPECT_EQ(ref.num_cached_tokens, 0);

  // The prompt cached first by a plain request: the prompt-logprobs request reads no hit...
  Engine cached(model, qwen_tokenizer(), small_engine_config());
  collect(*cached.submit(greedy_request("warm", prompt, 1)));
  const auto cold = collect(*cached.submit(prompt_logprobs_request("pl", prompt, 3, 4)));
  EXPECT_EQ(cold.num_cached_tokens, 0);
  expect_same(*ref.prompt_logprobs[0], *cold.prompt_logprobs[0], "after a cached run");
  EXPECT_EQ(cold.tokens, ref.tokens);
  // ...and a plain request after it still hits what is cached.
  EXPECT_GT(collect(*cached.submit(greedy_request("hit", prompt, 1))).num_cached_tokens, 0);

  // Chunks of 13 tokens, batched with other requests (some asking for prompt logprobs too).
  EngineConfig small_chunks = small_engine_config();
  small_chunks.max_num_batched_tokens = 13;
  Engine chunked(model, qwen_tokenizer(), small_chunks);
  std::vector<std::shared_ptr<OutputChannel>> others;
  for (int i = 0; i < 3; ++i) {
    auto p = testing::random_prompt(rng, 20 + 17 * i);
    others.push_back(chunked.submit(i % 2 ? prompt_logprobs_request("o" + std::to_string(i), p, 2, 6)
                                          : greedy_request("o" + std::to_string(i), p, 6)));
  }
  const auto ch = chunked.submit(prompt_logprobs_request("pl", prompt, 3, 4));
  for (auto& o : others) collect(*o);
  const auto split = collect(*ch);
  expect_same(*ref.prompt_logprobs[0], *split.prompt_logprobs[0], "chunks of 13 in a batch");
  EXPECT_EQ(split.tokens, ref.tokens);
}

TEST(PromptLogprobs, EveryOneOfNSequencesGetsThem) {
  const auto model = tiny_model();
  Engine engine(model, qwen_tokenizer(), small_engine_config());
  const std::vector<int32_t> prompt{5, 6, 7, 8, 9, 10, 11};
  const auto one = collect(*engine.submit(prompt_logprobs_request("one", prompt, 2)));
  EngineRequest r = prompt_logprobs_request("n3", prompt, 2, 3);
  r.params.temperature = 1.0;
  r.params.seed = 1;
  r.params.n = 3;
  const auto three = collect(*engine.submit(std::move(r)), 3);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(three.prompt_logprobs[static_cast<size_t>(i)]) << i;
    expect_same(*one.prompt_logprobs[0], *three.prompt_logprobs[static_cast<size_t>(i)], "sequence " + std::to_string(i));
  }
}

TEST(PromptLogprobs, OneTokenPromptAndZeroTopAndWholeVocabulary) {
  const auto model = tiny_model();
  Engine engine(model, qwen_tokenizer(), small_engine_config());
  const auto single = collect(*engine.submit(prompt_logprobs_request("single", {42}, 3)));
  ASSERT_TRUE(single.prompt_logprobs[0]);
  ASSERT_EQ(single.prompt_logprobs[0]->size(), 1u);
  EXPECT_FALSE(single.prompt_logprobs[0]->front());

  const auto zero = collect(*engine.submit(prompt_logprobs_request("zero", {1, 2, 3}, 0)));
  ASSERT_TRUE(zero.prompt_logprobs[0]);
  EXPECT_TRUE(zero.prompt_logprobs[0]->at(2)->top.empty());
  EXPECT_EQ(zero.prompt_logprobs[0]->at(2)->sampled.token, 3);

  const auto all = collect(*engine.submit(prompt_logprobs_request("all", {1, 2, 3}, -1)));
  EXPECT_EQ(static_cast<int64_t>(all.prompt_logprobs[0]->at(1)->top.size()), model->vocab_size());
  EXPECT_EQ(all.prompt_logprobs[0]->at(2)->sampled.logprob, zero.prompt_logprobs[0]->at(2)->sampled.logprob);
}

}  // namespace
}  // namespace fp4serve::engine
