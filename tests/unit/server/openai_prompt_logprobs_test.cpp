// prompt_logprobs, echo with logprobs and bad_words at the API: what reaches the engine's
// SamplingParams (vLLM's to_sampling_params rules), vLLM's messages for bad values, and the
// response shapes (vLLM's completion/serving.py and chat_completion/serving.py).
#include <gtest/gtest.h>

#include "server/openai/chat_request.h"
#include "server/openai/chat_response.h"
#include "server/openai/completion_request.h"
#include "server/openai/completion_response.h"
#include "server/openai/logprobs_format.h"
#include "openai_test_support.h"    // NOLINT
#include "openai_test_tokenizer.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;
using testing::tiny_tokenizer;

CompletionRequest completion(const std::string& body) {
  return parse_completion_request(std::string_view(body), test_limits());
}
ChatRequest chat(const std::string& body) { return parse_chat_request(std::string_view(body), test_limits()); }

engine::SamplingParams completion_params(const std::string& body) {
  return to_sampling_params(completion(body), 16, {}, test_limits());
}
engine::SamplingParams chat_params(const std::string& body) { return to_sampling_params(chat(body), 16, {}, test_limits()); }

ApiError completion_error(const std::string& body) {
  return expect_api_error([&] { completion_params(body); });
}

engine::SampleLogprobs entry(int32_t token, float logprob, int64_t rank, std::vector<engine::TokenLogprob> top) {
  engine::SampleLogprobs s;
  s.sampled = {token, logprob};
  s.sampled_rank = rank;
  s.top = std::move(top);
  return s;
}

ResponseContext context() {
  ResponseContext c;
  c.id = "x";
  c.created = 1730000000;
  c.model = "qwen3.6";
  c.tokenizer = &tiny_tokenizer();
  return c;
}

TEST(PromptLogprobsRequest, WhatTheEngineIsAskedFor) {
  EXPECT_FALSE(completion_params(R"({"prompt": "x"})").prompt_logprobs);
  EXPECT_EQ(completion_params(R"({"prompt": "x", "prompt_logprobs": 3})").prompt_logprobs, 3);
  // echo scores the prompt at the logprobs count, unless prompt_logprobs says otherwise.
  EXPECT_EQ(completion_params(R"({"prompt": "x", "echo": true, "logprobs": 2})").prompt_logprobs, 2);
  EXPECT_EQ(completion_params(R"({"prompt": "x", "echo": true, "logprobs": 2, "prompt_logprobs": 0})").prompt_logprobs, 0);
  EXPECT_FALSE(completion_params(R"({"prompt": "x", "echo": true})").prompt_logprobs);
  // lm-eval's loglikelihood request: echo, logprobs 1, max_tokens 1 (or 0).
  const auto lm_eval = completion_params(R"({"prompt": [1, 2, 3], "echo": true, "logprobs": 1, "max_tokens": 0,
                                             "temperature": 0})");
  EXPECT_EQ(lm_eval.prompt_logprobs, 1);
  EXPECT_EQ(lm_eval.logprobs, 1);
  EXPECT_EQ(lm_eval.max_tokens, 1);
  // Chat: prompt_logprobs, or echo at top_logprobs (0 by default; null means none).
  EXPECT_EQ(chat_params(R"({"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 4})").prompt_logprobs, 4);
  EXPECT_EQ(chat_params(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})").prompt_logprobs, 0);
  EXPECT_EQ(chat_params(R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "logprobs": true,
                            "top_logprobs": 5})").prompt_logprobs, 5);
  EXPECT_FALSE(chat_params(R"({"messages": [{"role": "user", "content": "x"}], "echo": true, "top_logprobs": null})")
                   .prompt_logprobs);
}

TEST(PromptLogprobsRequest, VllmMessages) {
  ApiError e = completion_error(R"({"prompt": "x", "prompt_logprobs": 21})");
  EXPECT_EQ(e.body(),
            R"J({"error":{"message":"Requested prompt logprobs of 21, which is greater than max allowed: 20 (parameter=prompt_logprobs, value=21)","type":"BadRequestError","param":"prompt_logprobs","code":400}})J");
  e = completion_error(R"({"prompt": "x", "prompt_logprobs": -1})");
  EXPECT_EQ(e.message,
            "Requested prompt logprobs of 248320, which is greater than max allowed: 20 (parameter=prompt_logprobs, "
            "value=248320)");
  e = completion_error(R"({"prompt": "x", "echo": true, "logprobs": 25})");
  EXPECT_EQ(e.param, "logprobs") << "sample logprobs are checked first";
  // Pydantic-stage checks (before validators): a 400 "Bad Request" naming the field.
  e = expect_api_error([&] { completion(R"({"prompt": "x", "prompt_logprobs": 1, "stream": true})"); });
  EXPECT_NE(e.message.find("`prompt_logprobs` are not available when `stream=True`."), std::string::npos) << e.message;
  e = expect_api_error([&] { completion(R"({"prompt": "x", "prompt_logprobs": -2})"); });
  EXPECT_NE(e.message.find("`prompt_logprobs` must be a positive value or -1."), std::string::npos) << e.message;
  // prompt_logprobs 0 with stream is allowed (vLLM checks > 0 or -1), as is echo + logprobs + stream.
  EXPECT_NO_THROW(completion(R"({"prompt": "x", "prompt_logprobs": 0, "stream": true})"));
  EXPECT_NO_THROW(completion(R"({"prompt": "x", "echo": true, "logprobs": 1, "stream": true})"));
}

TEST(BadWordsRequest, ReachesTheEngineAndIsValidatedAsVllmDoes) {
  EXPECT_EQ(completion_params(R"({"prompt": "x", "bad_words": ["a", "b", "a"]})").bad_words,
            (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(chat_params(R"({"messages": [{"role": "user", "content": "x"}], "bad_words": ["z"]})").bad_words,
            (std::vector<std::string>{"z"}));
  ApiError e = completion_error(R"({"prompt": "x", "bad_words": ["a", ""]})");
  EXPECT_EQ(e.body(),
            R"J({"error":{"message":"bad_words cannot contain an empty string. Got bad_words=['a', '']","type":"BadRequestError","param":null,"code":400}})J");
  // Tokenization refusals carry the words as the value.
  engine::SamplingParams p = completion_params(R"({"prompt": "x", "bad_words": ["  "]})");
  e = expect_api_error([&] { resolve_bad_words(p, tiny_tokenizer()); });
  EXPECT_EQ(e.message, "bad_words entries must tokenize to at least one token. (parameter=bad_words, value=['  '])");
  p = completion_params(R"({"prompt": "x", "bad_words": ["hello"]})");
  resolve_bad_words(p, tiny_tokenizer());
  // " hello" is ' ' 'hello' in this vocabulary: a longer sequence, so only "hello" is banned.
  EXPECT_EQ(p.bad_words_token_ids, (std::vector<std::vector<int32_t>>{{259}}));
  e = expect_api_error([&] { completion(R"({"prompt": "x", "bad_words": "hello"})"); });
  EXPECT_EQ(e.type, "Bad Request");
}

TEST(PromptLogprobsResponse, VllmShape) {
  // Token 105 "i" is 4th by its row but in the top-1 list of none; 33 "!" is in its own top list.
  const engine::PromptLogprobs p = {std::nullopt, entry(105, -2.0f, 4, {{33, -0.5f}}),
                                    entry(33, -0.25f, 3, {{33, -0.25f}, {259, -1.0f}})};
  EXPECT_EQ(dump_json(prompt_logprobs_json(tiny_tokenizer(), p)),
            R"([null,{"105":{"logprob":-2.0,"rank":4,"decoded_token":"i"},"33":{"logprob":-0.5,"rank":1,"decoded_token":"!"}},)"
            R"({"33":{"logprob":-0.25,"rank":1,"decoded_token":"!"},"259":{"logprob":-1.0,"rank":2,"decoded_token":"hello"}}])");
  const engine::PromptLogprobs inf = {std::nullopt, entry(105, -INFINITY, 9, {})};
  EXPECT_EQ(dump_json(prompt_logprobs_json(tiny_tokenizer(), inf)),
            R"([null,{"105":{"logprob":-9999.0,"rank":9,"decoded_token":"i"}}])");
}

CompletionPromptResult echo_result() {
  CompletionPromptResult r;
  r.prompt_text = "Hi";
  r.prompt_token_ids = {72, 105};
  CompletionSequence s;
  s.text = "!";
  s.token_ids = {33};
  s.logprobs = {entry(33, -0.75f, 1, {{33, -0.75f}})};
  s.finish_reason = "length";
  s.prompt_logprobs = engine::PromptLogprobs{std::nullopt, entry(105, -2.0f, 4, {{33, -0.5f}})};
  r.sequences = {s};
  return r;
}

TEST(PromptLogprobsResponse, CompletionEchoPutsThePromptAheadOfTheOutput) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "echo": true, "logprobs": 1, "max_tokens": 1})");
  const Json out = build_completion_response(req, {echo_result()}, context());
  const Json& choice = out["choices"][0];
  EXPECT_EQ(choice["text"], "Hi!");
  EXPECT_EQ(dump_json(choice["logprobs"]),
            R"({"text_offset":[0,1,2],"token_logprobs":[null,-2.0,-0.75],"tokens":["H","i","!"],)"
            R"("top_logprobs":[null,{"i":-2.0,"!":-0.5},{"!":-0.75}]})");
  EXPECT_EQ(dump_json(choice["prompt_logprobs"]),
            R"([null,{"105":{"logprob":-2.0,"rank":4,"decoded_token":"i"},"33":{"logprob":-0.5,"rank":1,"decoded_token":"!"}}])");

  // max_tokens 0 (what lm-eval may send): the prompt alone, its logprobs alone.
  const CompletionRequest only = completion(R"({"prompt": "Hi", "echo": true, "logprobs": 0, "max_tokens": 0})");
  const Json o = build_completion_response(only, {echo_result()}, context())["choices"][0];
  EXPECT_EQ(o["text"], "Hi");
  EXPECT_EQ(dump_json(o["logprobs"]),
            R"({"text_offset":[0,1],"token_logprobs":[null,-2.0],"tokens":["H","i"],"top_logprobs":[null,{"i":-2.0}]})");
}

TEST(PromptLogprobsResponse, CompletionEchoStreamFirstChunk) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "echo": true, "logprobs": 1, "stream": true})");
  CompletionStream stream(req, context());
  engine::RequestOutput out;
  engine::SequenceDelta d;
  d.token_ids = {33};
  d.text = "!";
  d.logprobs = echo_result().sequences[0].logprobs;
  d.prompt_logprobs = echo_result().sequences[0].prompt_logprobs;
  out.deltas = {d};
  out.num_prompt_tokens = 2;
  const std::string sse = stream.on_output(0, "Hi", {72, 105}, out);
  EXPECT_NE(sse.find(R"("text":"Hi!","logprobs":{"text_offset":[0,1,2],"token_logprobs":[null,-2.0,-0.75],)"
                     R"("tokens":["H","i","!"],"top_logprobs":[null,{"i":-2.0,"!":-0.5},{"!":-0.75}]})"),
            std::string::npos)
      << sse;
  EXPECT_EQ(sse.find("prompt_logprobs"), std::string::npos) << "vLLM's stream choice has no prompt_logprobs";
  d.prompt_logprobs.reset();
  d.token_ids = {259};
  d.text = "hello";
  d.logprobs = {entry(259, -0.125f, 1, {})};
  out.deltas = {d};
  EXPECT_NE(stream.on_output(0, "Hi", {72, 105}, out).find(R"("text_offset":[3])"), std::string::npos);
}

TEST(PromptLogprobsResponse, ChatTopLevel) {
  const ChatRequest req = chat(R"({"messages": [{"role": "user", "content": "Hi"}], "prompt_logprobs": 1})");
  ChatResult result;
  result.prompt_token_ids = {72, 105};
  ChatSequence s;
  s.message.content = "!";
  s.token_ids = {33};
  s.finish_reason = "length";
  s.prompt_logprobs = echo_result().sequences[0].prompt_logprobs;
  result.sequences = {s};
  const Json out = build_chat_response(req, result, context());
  EXPECT_EQ(dump_json(out["prompt_logprobs"]),
            R"([null,{"105":{"logprob":-2.0,"rank":4,"decoded_token":"i"},"33":{"logprob":-0.5,"rank":1,"decoded_token":"!"}}])");
  EXPECT_FALSE(out["choices"][0].contains("prompt_logprobs"));
}

}  // namespace
}  // namespace fp4serve::server::openai
