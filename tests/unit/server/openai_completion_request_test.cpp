// /v1/completions request parsing: vLLM's errors (message, param, status) and the typed result.
#include <gtest/gtest.h>

#include "server/openai/completion_request.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

CompletionRequest parse(const std::string& text) { return parse_completion_request(std::string_view(text), test_limits()); }

ApiError error_of(const std::string& text) {
  return expect_api_error([&] { parse(text); });
}

TEST(CompletionRequest, Defaults) {
  const CompletionRequest r = parse(R"({"prompt": "Hello"})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "Hello");
  EXPECT_EQ(r.max_tokens, 16);
  EXPECT_EQ(r.common.n, 1);
  EXPECT_FALSE(r.common.stream);
  EXPECT_TRUE(r.common.add_special_tokens);
  EXPECT_TRUE(r.common.skip_special_tokens);
  EXPECT_EQ(r.model_name, "qwen3.6");
  EXPECT_FALSE(r.logprobs.has_value());
}

TEST(CompletionRequest, NullMaxTokensIsSixteen) {
  EXPECT_EQ(parse(R"({"prompt": "a", "max_tokens": null})").max_tokens, 16);
  EXPECT_EQ(parse(R"({"prompt": "a", "max_tokens": 5})").max_tokens, 5);
}

TEST(CompletionRequest, PromptForms) {
  auto r = parse(R"({"prompt": [1, 2, 3]})");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.prompts[0].text);
  EXPECT_EQ(r.prompts[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  r = parse(R"({"prompt": [[1], [2, 3]]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].token_ids, (std::vector<int32_t>{2, 3}));
  r = parse(R"({"prompt": ["a", "b"]})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.prompts[1].text, "b");
}

TEST(CompletionRequest, MissingOrEmptyPrompt) {
  for (const char* body : {R"({})", R"({"prompt": ""})", R"({"prompt": null})"}) {
    const ApiError e = error_of(body);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.type, "Bad Request");
    EXPECT_EQ(e.param, "prompt");
    EXPECT_NE(e.message.find("'msg': 'Value error, Either prompt or prompt_embeds must be provided and non-empty. "
                             "(parameter=prompt)'"),
              std::string::npos)
        << e.message;
  }
}

TEST(CompletionRequest, EmptyPromptListIsRefused) {
  const ApiError e = error_of(R"({"prompt": []})");
  EXPECT_EQ(e.message, "please provide at least one prompt");
  EXPECT_EQ(e.type, "BadRequestError");
}

TEST(CompletionRequest, PromptOfWrongTypeListsEveryUnionBranch) {
  const ApiError e = error_of(R"({"prompt": 5})");
  EXPECT_EQ(e.param, "body.prompt");
  EXPECT_EQ(e.message.rfind("4 validation errors:\n", 0), 0u) << e.message;
}

TEST(CompletionRequest, NegativeTokenIdIsRefused) {
  const ApiError e = error_of(R"({"prompt": [-1]})");
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_NE(e.message.find("Input should be greater than or equal to 0"), std::string::npos) << e.message;
}

TEST(CompletionRequest, StreamOptionsWithoutStream) {
  const ApiError e = error_of(R"({"prompt": "x", "stream_options": {"include_usage": true}})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "stream_options");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'value_error', 'loc': 'body', 'msg': 'Value error, Stream options can "
            "only be defined when `stream=True`. (parameter=stream_options)', 'input': '<dict of 2 items>', 'ctx': "
            "{'error': VLLMValidationError('Stream options can only be defined when `stream=True`.')}}");
  // An empty dict is falsy in Python: accepted.
  EXPECT_NO_THROW(parse(R"({"prompt": "x", "stream_options": {}})"));
}

TEST(CompletionRequest, StreamOptions) {
  auto r = parse(R"({"prompt": "x", "stream": true, "stream_options": {"continuous_usage_stats": true}})");
  ASSERT_TRUE(r.common.stream_options);
  EXPECT_TRUE(r.common.stream_options->include_usage);
  EXPECT_TRUE(r.common.stream_options->continuous_usage_stats);
  EXPECT_EQ(should_include_usage(r.common.stream_options, false), std::make_pair(true, true));
  EXPECT_EQ(should_include_usage(std::nullopt, false), std::make_pair(false, false));
  EXPECT_EQ(should_include_usage(std::nullopt, true), std::make_pair(true, false));
  StreamOptions off;
  off.include_usage = false;
  off.continuous_usage_stats = true;
  EXPECT_EQ(should_include_usage(off, false), std::make_pair(false, false));
}

TEST(CompletionRequest, WrongTypes) {
  ApiError e = error_of(R"({"prompt": "x", "temperature": "hot"})");
  EXPECT_EQ(e.param, "body.temperature");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'float_parsing', 'loc': 'body.temperature', 'msg': 'Input should be a "
            "valid number, unable to parse string as a number', 'input': 'hot'}");
  e = error_of(R"({"prompt": "x", "max_tokens": 1.5})");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'int_from_float', 'loc': 'body.max_tokens', 'msg': 'Input should be a "
            "valid integer, got a number with a fractional part', 'input': '1.5'}");
  e = error_of(R"({"prompt": "x", "n": null})");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'int_type', 'loc': 'body.n', 'msg': 'Input should be a valid integer', "
            "'input': 'None'}");
  e = error_of(R"({"prompt": "x", "echo": "maybe"})");
  EXPECT_NE(e.message.find("'type': 'bool_parsing'"), std::string::npos);
  e = error_of(R"({"prompt": "x", "stop": 3})");
  EXPECT_EQ(e.message.rfind("2 validation errors:", 0), 0u);
  EXPECT_EQ(e.param, "body.stop");
  e = error_of(R"({"prompt": "x", "temperature": "a", "top_p": "b"})");
  EXPECT_EQ(e.message.rfind("2 validation errors:", 0), 0u);
}

TEST(CompletionRequest, LaxCoercionsAsPydantic) {
  const CompletionRequest r = parse(R"({"prompt": "x", "max_tokens": "12", "temperature": "0.5", "echo": "yes", "n": 2.0})");
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_EQ(r.common.temperature, 0.5);
  EXPECT_TRUE(r.common.echo);
  EXPECT_EQ(r.common.n, 2);
}

TEST(CompletionRequest, StopAsStringOrList) {
  EXPECT_EQ(parse(R"({"prompt": "x", "stop": "\n"})").common.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(parse(R"({"prompt": "x", "stop": ["a", "b"]})").common.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(parse(R"({"prompt": "x", "stop": null})").common.stop.empty());
}

TEST(CompletionRequest, LogprobsChecks) {
  ApiError e = error_of(R"({"prompt": "x", "logprobs": -2})");
  EXPECT_EQ(e.param, "logprobs");
  EXPECT_NE(e.message.find("Value error, `logprobs` must be a positive value or -1. (parameter=logprobs, value=-2)"),
            std::string::npos)
      << e.message;
  e = error_of(R"({"prompt": "x", "logprobs": "two"})");
  EXPECT_NE(e.message.find("`logprobs` must be an integer. (parameter=logprobs, value=two)"), std::string::npos);
  EXPECT_EQ(parse(R"({"prompt": "x", "logprobs": 5})").logprobs, 5);
}

TEST(CompletionRequest, UnknownModelIs404) {
  const ApiError e = error_of(R"({"prompt": "x", "model": "gpt-4"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.body(), R"({"error":{"message":"The model `gpt-4` does not exist.","type":"NotFoundError","param":"model","code":404}})");
  EXPECT_EQ(parse(R"({"prompt": "x", "model": ""})").model_name, "qwen3.6");
  EXPECT_EQ(parse(R"({"prompt": "x", "model": "qwen3.6"})").model_name, "qwen3.6");
}

TEST(CompletionRequest, UnknownFieldsAreReturnedForTheWarning) {
  const CompletionRequest r = parse(R"({"prompt": "x", "foo": 1, "bar": 2})");
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"foo", "bar"}));
  EXPECT_EQ(ignored_fields_warning(r.ignored_fields),
            "The following fields were present in the request but ignored: {'foo', 'bar'}");
}

TEST(CompletionRequest, UnsupportedFieldsAreRefusedClearly) {
  EXPECT_EQ(error_of(R"({"prompt": "x", "suffix": "y"})").message, "suffix is not currently supported");
  ApiError e = error_of(R"({"prompt": "x", "use_beam_search": true})");
  EXPECT_EQ(e.param, "use_beam_search");
  EXPECT_NO_THROW(parse(R"({"prompt": "x", "response_format": {"type": "json_object"}})"));
  EXPECT_NO_THROW(parse(R"({"prompt": "x", "response_format": {"type": "text"}})"));
  e = error_of(R"({"prompt": "x", "response_format": {"type": "json_schema"}})");
  EXPECT_EQ(e.type, "Bad Request");  // vLLM's own validator runs first
  EXPECT_NE(e.message.find("\"Value error, When response_format type is 'json_schema', the 'json_schema' field must be "
                           "provided. (parameter=response_format)\""),
            std::string::npos)
      << e.message;
  EXPECT_NO_THROW(parse(R"({"prompt": "x", "structured_outputs": {"regex": "a+"}})"));
  EXPECT_EQ(error_of(R"({"prompt": "x", "guided_json": {}})").param, "guided_json");
}

TEST(CompletionRequest, CacheSalt) {
  ApiError e = error_of(R"({"prompt": "x", "cache_salt": ""})");
  EXPECT_EQ(e.param, "cache_salt");
  EXPECT_NE(e.message.find("Parameter 'cache_salt' must be a non-empty string if provided."), std::string::npos)
      << e.message;
  e = error_of(R"({"prompt": "x", "cache_salt": "a/b"})");
  EXPECT_EQ(e.param, "cache_salt");
  EXPECT_EQ(parse(R"({"prompt": "x", "cache_salt": "salt"})").common.cache_salt, "salt");
}

TEST(CompletionRequest, MalformedJson) {
  ApiError e = error_of("{\"prompt\": ");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_EQ(e.param, "body.11");
  EXPECT_EQ(e.message,
            "1 validation error:\n  {'type': 'json_invalid', 'loc': 'body.11', 'msg': 'JSON decode error', 'input': "
            "'<dict of 0 items>', 'ctx': {'error': 'Expecting value'}}");
  e = error_of("");
  EXPECT_EQ(e.message, "1 validation error:\n  {'type': 'missing', 'loc': 'body', 'msg': 'Field required', 'input': 'None'}");
  e = error_of("[1]");
  EXPECT_NE(e.message.find("Input should be a valid dictionary or instance of CompletionRequest"), std::string::npos);
}

TEST(CompletionRequest, PromptListLimit) {
  ServerLimits limits = test_limits();
  limits.max_completion_prompts = 2;
  const ApiError e = expect_api_error([&] { parse_completion_request(std::string_view(R"({"prompt": ["a", "b", "c"]})"), limits); });
  EXPECT_EQ(e.param, "prompt");
  EXPECT_NE(e.message.find("prompt list length 3 exceeds the maximum allowed count of 2. To increase this limit, set the "
                           "VLLM_MAX_COMPLETION_PROMPTS environment variable."),
            std::string::npos);
}

TEST(CompletionRequestSampling, PrecedenceRequestThenServerThenOpenAI) {
  DefaultSamplingParams defaults;
  defaults.temperature = 0.7;
  defaults.top_k = 20;
  defaults.top_p = 0.95;
  defaults.stop_token_ids = {7, 8};
  const ServerLimits limits = test_limits();
  auto r = parse(R"({"prompt": "x", "temperature": 0.3, "stop_token_ids": [8, 9]})");
  auto p = to_sampling_params(r, 16, defaults, limits);
  EXPECT_EQ(p.temperature, 0.3);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.top_p, 0.95);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{8, 9, 7}));
  EXPECT_EQ(p.max_tokens, 16);
  r = parse(R"({"prompt": "x"})");
  p = to_sampling_params(r, 16, {}, limits);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
}

TEST(CompletionRequestSampling, EchoWithoutGenerationAsksForOneToken) {
  auto r = parse(R"({"prompt": "x", "echo": true, "max_tokens": 0})");
  EXPECT_TRUE(r.echo_without_generation());
  EXPECT_EQ(to_sampling_params(r, 0, {}, test_limits()).max_tokens, 1);
}

TEST(CompletionRequestSampling, VllmValidationMessages) {
  const ServerLimits limits = test_limits();
  auto sampling_error = [&](const std::string& body, int64_t max_tokens = 16) {
    return expect_api_error([&] { to_sampling_params(parse(body), max_tokens, {}, limits); });
  };
  ApiError e = sampling_error(R"({"prompt": "x", "temperature": -1})");
  EXPECT_EQ(e.body(),
            R"J({"error":{"message":"temperature must be non-negative, got -1.0. (parameter=temperature, value=-1.0)","type":"BadRequestError","param":"temperature","code":400}})J");
  e = sampling_error(R"({"prompt": "x", "top_p": 0})");
  EXPECT_EQ(e.message, "top_p must be in (0, 1], got 0.0. (parameter=top_p, value=0.0)");
  e = sampling_error(R"({"prompt": "x", "n": 0})");
  EXPECT_EQ(e.message, "n must be at least 1, got 0.");
  EXPECT_FALSE(e.param);
  e = sampling_error(R"({"prompt": "x", "presence_penalty": 3})");
  EXPECT_EQ(e.message, "presence_penalty must be in [-2, 2], got 3.0.");
  e = sampling_error(R"({"prompt": "x"})", 0);
  EXPECT_EQ(e.message, "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)");
  e = sampling_error(R"({"prompt": "x", "logprobs": 21})");
  EXPECT_EQ(e.message, "Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)");
  e = sampling_error(R"({"prompt": "x", "logit_bias": {"248320": 1}})");
  EXPECT_EQ(e.message,
            "token_id(s) [248320] in logit_bias contain out-of-vocab token ids. Vocabulary size: 248320 "
            "(parameter=logit_bias, value=[248320])");
  e = sampling_error(R"({"prompt": "x", "logit_bias": {"abc": 1}})");
  EXPECT_EQ(e.message, "invalid literal for int() with base 10: 'abc'");
  e = sampling_error(R"({"prompt": "x", "priority": 1})");
  EXPECT_EQ(e.message, "Got priority 1 but Priority scheduling is not enabled.");
  e = sampling_error(R"({"prompt": "x", "best_of": 2})");
  EXPECT_EQ(e.message, "vLLM V1 does not yet support best_of.");
  EXPECT_NO_THROW(to_sampling_params(parse(R"({"prompt": "x", "best_of": 1})"), 16, {}, limits));
  e = sampling_error(R"({"prompt": "x", "n": 2, "temperature": 0})");
  EXPECT_EQ(e.message, "n must be 1 when using greedy sampling, got 2.");
}

TEST(CompletionRequestSampling, LogitBiasIsClampedAndKeyed) {
  auto p = to_sampling_params(parse(R"({"prompt": "x", "logit_bias": {"5": 150, " 6": -1}})"), 16, {}, test_limits());
  EXPECT_EQ(p.logit_bias.at(5), 100.0);
  EXPECT_EQ(p.logit_bias.at(6), -1.0);
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

TEST(DefaultSamplingParams, FromGenerationConfigKeepsVllmKeysOnly) {
  // Qwen3.6's generation_config.json values (docs/model-arch.md §1.1) plus max_new_tokens.
  const GenerationConfig config = GenerationConfig::parse(
      R"({"bos_token_id": 248044, "eos_token_id": [248046, 248044], "do_sample": true, "temperature": 1.0,
          "top_k": 20, "top_p": 0.95, "presence_penalty": 1.5, "max_new_tokens": 32768})");
  const DefaultSamplingParams d = DefaultSamplingParams::from_generation_config(config);
  EXPECT_EQ(d.temperature, 1.0);
  EXPECT_EQ(d.top_k, 20);
  EXPECT_EQ(d.top_p, 0.95);
  EXPECT_EQ(d.max_tokens, 32768);
  EXPECT_FALSE(d.min_p);
  EXPECT_FALSE(d.repetition_penalty);
  // presence_penalty is not among get_diff_sampling_param's keys: the request or 0 decides.
  auto p = to_sampling_params(parse_completion_request(std::string_view(R"({"prompt": "x"})"), testing::test_limits()),
                              16, d, testing::test_limits());
  EXPECT_EQ(p.presence_penalty, 0.0);
  EXPECT_EQ(p.top_k, 20);
}

}  // namespace
}  // namespace fp4serve::server::openai
