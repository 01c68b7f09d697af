// bad_words as vLLM supports it: tokenization with and without a leading space
// (SamplingParams.update_from_tokenizer), its refusals word for word, and the sampler and engine
// never producing a banned word. The prefix match on the generated tokens
// (v1/sample/ops/bad_words.py) is the sampling op's: tests/unit/kernels/sampling_processors_test.cpp.
#include "engine/bad_words.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/sampler.h"
#include "unit/engine/engine_model_util.h"

namespace fp4serve::engine {
namespace {

using testing::qwen_tokenizer;

std::vector<int32_t> encode(const std::string& text) { return qwen_tokenizer()->encode(text, false); }

TEST(BadWordsTokenization, WordAtTheStartAndAfterASpace) {
  SamplingParams p;
  p.bad_words = {"hello"};
  ASSERT_FALSE(tokenize_bad_words(p, *qwen_tokenizer()));
  // Qwen's byte-level BPE folds the space into the token: "hello" and " hello" are different
  // single tokens, so both are banned.
  ASSERT_EQ(encode("hello").size(), 1u);
  ASSERT_EQ(encode(" hello").size(), 1u);
  ASSERT_NE(encode("hello"), encode(" hello"));
  EXPECT_EQ(p.bad_words_token_ids, (std::vector<std::vector<int32_t>>{encode("hello"), encode(" hello")}));
}

TEST(BadWordsTokenization, LeadingWhitespaceIsStrippedFirst) {
  SamplingParams a, b;
  a.bad_words = {"  \t\u3000hello"};
  b.bad_words = {"hello"};
  ASSERT_FALSE(tokenize_bad_words(a, *qwen_tokenizer()));
  ASSERT_FALSE(tokenize_bad_words(b, *qwen_tokenizer()));
  EXPECT_EQ(a.bad_words_token_ids, b.bad_words_token_ids);
}

TEST(BadWordsTokenization, SpaceFormKeptOnlyWhenItIsTheSameLengthWithAnotherFirstToken) {
  // A word whose spaced form tokenizes to a different length: only the plain form is banned.
  for (const std::string word : {"Straßenbahnhaltestelle", "fp4serve", "ünïcödé wörds"}) {
    SamplingParams p;
    p.bad_words = {word};
    ASSERT_FALSE(tokenize_bad_words(p, *qwen_tokenizer()));
    const auto plain = encode(word), spaced = encode(" " + word);
    std::vector<std::vector<int32_t>> want{plain};
    if (spaced.size() == plain.size() && spaced.front() != plain.front()) want.push_back(spaced);
    EXPECT_EQ(p.bad_words_token_ids, want) << word;
  }
}

TEST(BadWordsTokenization, VllmRefusals) {
  SamplingParams p;
  p.bad_words = {"ok", " \t "};  // non-empty (passes _verify_args) but no token once stripped
  auto err = tokenize_bad_words(p, *qwen_tokenizer());
  ASSERT_TRUE(err);
  EXPECT_EQ(err->message, "bad_words entries must tokenize to at least one token.");
  EXPECT_EQ(err->parameter, "bad_words");

  SamplingParams many;
  for (int i = 0; i < 65; ++i) many.bad_words.push_back("word" + std::to_string(i));
  err = tokenize_bad_words(many, *qwen_tokenizer());
  ASSERT_TRUE(err);
  EXPECT_EQ(err->message, "Too many bad words after tokenization: 129. The max number is 128.");
  SamplingParams two;
  two.bad_words = {"bad", "worse"};
  err = tokenize_bad_words(two, *qwen_tokenizer(), 2);
  ASSERT_TRUE(err);
  EXPECT_EQ(err->message, "Too many bad words after tokenization: 3. The max number is 2.");
}

TEST(BadWordsSampler, GreedyTakesTheNextBestToken) {
  SamplerConfig c;
  c.vocab_size = 8;
  c.valid_vocab_size = 8;
  Sampler s(c);
  std::vector<float> logits{0.0f, 5.0f, 4.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  SamplingParams p;
  p.temperature = 0.0;
  p.logprobs = 1;
  p.bad_words_token_ids = {{1}, {6, 2}};
  const std::vector<int32_t> output_without_prefix{3};
  SampleInput in{logits, &p, {}, output_without_prefix};
  SampleOutput out = s.sample(std::span<const SampleInput>(&in, 1)).at(0);
  EXPECT_EQ(out.token, 2);
  // Logprobs stay raw (vLLM computes them before any processor): token 1 is still the top one.
  EXPECT_EQ(out.logprobs->top.at(0).token, 1);
  EXPECT_FLOAT_EQ(logits[1], 5.0f) << "the row is restored";
  const std::vector<int32_t> output_with_prefix{3, 6};
  in.output_ids = output_with_prefix;
  EXPECT_EQ(s.sample(std::span<const SampleInput>(&in, 1)).at(0).token, 3);
}

TEST(BadWordsEngine, GreedyOutputNeverContainsTheBannedTokens) {
  auto model = testing::tiny_model();
  Engine engine(model, qwen_tokenizer(), testing::small_engine_config());
  const std::vector<int32_t> prompt{11, 22, 33, 44, 55};
  const auto plain = testing::collect(*engine.submit(testing::greedy_request("plain", prompt, 24)));
  ASSERT_EQ(plain.tokens[0].size(), 24u);
  // Ban the first two distinct greedy tokens (one-token "words" given as token sequences).
  EngineRequest r = testing::greedy_request("banned", prompt, 24);
  const int32_t first = plain.tokens[0][0];
  const auto second_it = std::find_if(plain.tokens[0].begin(), plain.tokens[0].end(), [&](int32_t t) { return t != first; });
  ASSERT_NE(second_it, plain.tokens[0].end());
  r.params.bad_words_token_ids = {{first}, {*second_it}};
  const auto banned = testing::collect(*engine.submit(std::move(r)));
  ASSERT_EQ(banned.tokens[0].size(), 24u);
  for (int32_t t : banned.tokens[0]) {
    EXPECT_NE(t, first);
    EXPECT_NE(t, *second_it);
  }
}

}  // namespace
}  // namespace fp4serve::engine
