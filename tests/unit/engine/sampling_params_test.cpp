// SamplingParams normalisation and validation: vLLM's rules, order and messages
// (vllm/sampling_params.py from_optional, __post_init__, _verify_args, verify).
#include "engine/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace fp4serve::engine {
namespace {

SamplingLimits qwen_limits() {
  SamplingLimits limits;
  limits.vocab_size = 248320;
  return limits;
}

// The message prepare_sampling_params gives for `p`, or "" when it accepts it.
std::string error_of(SamplingParams p, std::string* parameter = nullptr) {
  auto err = prepare_sampling_params(p, qwen_limits());
  if (!err) return "";
  if (parameter) *parameter = err->parameter;
  return err->message;
}

TEST(PythonFloatRepr, MatchesPythonRepr) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(-1.0), "-1.0");
  EXPECT_EQ(python_float_repr(3.0), "3.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(2.5), "2.5");
  EXPECT_EQ(python_float_repr(123.456), "123.456");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(1e-05), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-07), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1e22), "1e+22");
  EXPECT_EQ(python_float_repr(12345678901234567890.0), "1.2345678901234567e+19");
  EXPECT_EQ(python_float_repr(0.0), "0.0");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(python_float_repr(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(python_float_repr(std::nan("")), "nan");
}

TEST(SamplingParamsValidation, DefaultsAreAccepted) { EXPECT_EQ(error_of(SamplingParams{}), ""); }

TEST(SamplingParamsValidation, TemperatureMessages) {
  SamplingParams p;
  std::string param;
  p.temperature = -1.0;
  EXPECT_EQ(error_of(p, &param), "temperature must be non-negative, got -1.0.");
  EXPECT_EQ(param, "temperature");
  p.temperature = 2.5;
  EXPECT_EQ(error_of(p), "temperature must be in [0, 2], got 2.5.");
  p.temperature = std::numeric_limits<double>::infinity();
  EXPECT_EQ(error_of(p), "temperature must be a finite number, got inf.");
  p.temperature = 2.0;
  EXPECT_EQ(error_of(p), "");
  p.temperature = 0.0;
  EXPECT_EQ(error_of(p), "");
}

TEST(SamplingParamsValidation, RangeMessages) {
  std::string param;
  {
    SamplingParams p;
    p.top_p = 0.0;
    EXPECT_EQ(error_of(p, &param), "top_p must be in (0, 1], got 0.0.");
    EXPECT_EQ(param, "top_p");
    p.top_p = 1.5;
    EXPECT_EQ(error_of(p), "top_p must be in (0, 1], got 1.5.");
  }
  {
    SamplingParams p;
    p.top_k = -2;
    EXPECT_EQ(error_of(p, &param), "top_k must be 0 (disable), or at least 1, got -2.");
    EXPECT_EQ(param, "");
    p.top_k = -1;  // quietly accepted as "off"
    EXPECT_EQ(error_of(p), "");
  }
  {
    SamplingParams p;
    p.min_p = 1.5;
    EXPECT_EQ(error_of(p), "min_p must be in [0, 1], got 1.5.");
  }
  {
    SamplingParams p;
    p.presence_penalty = 3;
    EXPECT_EQ(error_of(p), "presence_penalty must be in [-2, 2], got 3.0.");
  }
  {
    SamplingParams p;
    p.frequency_penalty = -2.5;
    EXPECT_EQ(error_of(p), "frequency_penalty must be in [-2, 2], got -2.5.");
  }
  {
    SamplingParams p;
    p.repetition_penalty = 0.0;
    EXPECT_EQ(error_of(p), "repetition_penalty must be greater than zero, got 0.0.");
    p.repetition_penalty = std::nan("");
    EXPECT_EQ(error_of(p), "repetition_penalty must be a finite number, got nan.");
  }
  {
    SamplingParams p;
    p.max_tokens = 0;
    EXPECT_EQ(error_of(p, &param), "max_tokens must be at least 1, got 0.");
    EXPECT_EQ(param, "max_tokens");
  }
  {
    SamplingParams p;
    p.min_tokens = -1;
    EXPECT_EQ(error_of(p), "min_tokens must be greater than or equal to 0, got -1.");
    p.min_tokens = 20;  // max_tokens defaults to 16
    EXPECT_EQ(error_of(p), "min_tokens must be less than or equal to max_tokens=16, got 20.");
    p.max_tokens.reset();
    EXPECT_EQ(error_of(p), "");
  }
  {
    SamplingParams p;
    p.n = 0;
    EXPECT_EQ(error_of(p), "n must be at least 1, got 0.");
    p.n = 20000;
    EXPECT_EQ(error_of(p),
              "n must be at most 16384, got 20000. To increase this limit, set the "
              "VLLM_MAX_N_SEQUENCES environment variable.");
  }
  {
    SamplingParams p;
    p.stop = {"ok", ""};
    EXPECT_EQ(error_of(p), "stop cannot contain an empty string.");
  }
}

TEST(SamplingParamsValidation, LogprobsMessages) {
  SamplingParams p;
  std::string param;
  p.logprobs = -2;
  EXPECT_EQ(error_of(p, &param), "logprobs must be non-negative or -1, got -2.");
  EXPECT_EQ(param, "logprobs");
  p.logprobs = 21;
  EXPECT_EQ(error_of(p, &param),
            "Requested sample logprobs of 21, which is greater than max allowed: 20");
  EXPECT_EQ(param, "logprobs");
  p.logprobs = -1;  // the whole vocabulary
  EXPECT_EQ(error_of(p),
            "Requested sample logprobs of 248320, which is greater than max allowed: 20");
  p.logprobs = 20;
  EXPECT_EQ(error_of(p), "");
  p.logprobs = 0;
  EXPECT_EQ(error_of(p), "");

  SamplingLimits unlimited = qwen_limits();
  unlimited.max_logprobs = -1;
  SamplingParams all;
  all.logprobs = -1;
  EXPECT_FALSE(prepare_sampling_params(all, unlimited).has_value());
}

TEST(SamplingParamsValidation, PromptLogprobsMessages) {
  SamplingParams p;
  std::string param;
  p.prompt_logprobs = -2;
  EXPECT_EQ(error_of(p, &param), "prompt_logprobs must be non-negative or -1, got -2.");
  EXPECT_EQ(param, "prompt_logprobs");
  p.prompt_logprobs = 21;
  EXPECT_EQ(error_of(p, &param), "Requested prompt logprobs of 21, which is greater than max allowed: 20");
  EXPECT_EQ(param, "prompt_logprobs");
  p.prompt_logprobs = -1;
  EXPECT_EQ(error_of(p), "Requested prompt logprobs of 248320, which is greater than max allowed: 20");
  p.prompt_logprobs = 20;
  EXPECT_EQ(error_of(p), "");
  p.prompt_logprobs = 0;  // the prompt token's own logprob only
  EXPECT_EQ(error_of(p), "");
  // Sample logprobs are checked first (vLLM _validate_logprobs).
  p.logprobs = 30;
  p.prompt_logprobs = 30;
  EXPECT_EQ(error_of(p, &param), "Requested sample logprobs of 30, which is greater than max allowed: 20");

  SamplingLimits unlimited = qwen_limits();
  unlimited.max_logprobs = -1;
  SamplingParams all;
  all.prompt_logprobs = -1;
  EXPECT_FALSE(prepare_sampling_params(all, unlimited).has_value());
}

TEST(SamplingParamsValidation, BadWords) {
  SamplingParams p;
  p.bad_words = {"a", "b", "a", "c", "b"};
  ASSERT_FALSE(prepare_sampling_params(p, qwen_limits()));
  EXPECT_EQ(p.bad_words, (std::vector<std::string>{"a", "b", "c"})) << "dict.fromkeys order";
  SamplingParams empty;
  empty.bad_words = {"x", "", "it's", "x"};
  std::string param = "unset";
  EXPECT_EQ(error_of(empty, &param), "bad_words cannot contain an empty string. Got bad_words=['x', '', \"it's\"]");
  EXPECT_EQ(param, "");
}

TEST(SamplingParamsValidation, LogitBiasOutOfVocabulary) {
  SamplingParams p;
  std::string param;
  p.logit_bias = {{5, 1.0}, {248320, 2.0}, {-1, 0.5}};
  // vLLM lists them in the request's order; ours is ascending (the map's order).
  EXPECT_EQ(error_of(p, &param),
            "token_id(s) [-1, 248320] in logit_bias contain out-of-vocab token ids. Vocabulary "
            "size: 248320");
  EXPECT_EQ(param, "logit_bias");
  p.logit_bias = {{248319, 1.0}};  // a padding row is "in vocabulary" for vLLM too
  EXPECT_EQ(error_of(p), "");
}

TEST(SamplingParamsValidation, FirstViolationInVllmOrderWins) {
  SamplingParams p;
  p.n = 0;
  p.temperature = -1.0;
  p.top_p = 0.0;
  EXPECT_EQ(error_of(p), "n must be at least 1, got 0.");
  p.n = 1;
  EXPECT_EQ(error_of(p), "temperature must be non-negative, got -1.0.");
  p.temperature = 1.0;
  p.logprobs = 50;  // checked after _verify_args
  EXPECT_EQ(error_of(p), "top_p must be in (0, 1], got 0.0.");
}

TEST(SamplingParamsValidation, GreedyRequiresSingleSequence) {
  SamplingParams p;
  p.temperature = 0.0;
  p.n = 2;
  EXPECT_EQ(error_of(p), "n must be 1 when using greedy sampling, got 2.");
}

TEST(SamplingParamsNormalisation, AsVllmPostInit) {
  SamplingParams p;
  p.temperature = 0.005;
  p.seed = -1;
  p.logit_bias = {{1, 150.0}, {2, -250.0}, {3, 7.5}};
  p.stop_token_ids = {7, 3, 7, 9, 3};
  bool raised = false;
  ASSERT_FALSE(prepare_sampling_params(p, qwen_limits(), &raised).has_value());
  EXPECT_TRUE(raised);
  EXPECT_DOUBLE_EQ(p.temperature, 0.01);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_DOUBLE_EQ(p.logit_bias[1], 100.0);
  EXPECT_DOUBLE_EQ(p.logit_bias[2], -100.0);
  EXPECT_DOUBLE_EQ(p.logit_bias[3], 7.5);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{7, 3, 9}));

  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.top_k = 20;
  greedy.top_p = 0.5;
  greedy.min_p = 0.1;
  ASSERT_FALSE(prepare_sampling_params(greedy, qwen_limits(), &raised).has_value());
  EXPECT_FALSE(raised);
  EXPECT_TRUE(greedy.greedy());
  EXPECT_EQ(greedy.top_k, 0);
  EXPECT_EQ(greedy.top_p, 1.0);
  EXPECT_EQ(greedy.min_p, 0.0);
}

TEST(SamplingParamsChildren, SeedPlusIndex) {
  SamplingParams parent;
  parent.n = 4;
  parent.seed = 100;
  const SamplingParams c2 = child_sampling_params(parent, 2);
  EXPECT_EQ(c2.n, 1);
  ASSERT_TRUE(c2.seed.has_value());
  EXPECT_EQ(*c2.seed, 102);
  parent.seed.reset();
  EXPECT_FALSE(child_sampling_params(parent, 3).seed.has_value());
}

}  // namespace
}  // namespace fp4serve::engine
