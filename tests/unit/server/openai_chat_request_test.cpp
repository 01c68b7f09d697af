// /v1/chat/completions request parsing: vLLM's consistency errors, messages for the template.
#include <gtest/gtest.h>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "openai_test_support.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;

ChatRequest parse(const std::string& text, const ServerLimits& limits = test_limits(),
                  const ChatParseOptions& options = {}) {
  return parse_chat_request(std::string_view(text), limits, options);
}

ApiError error_of(const std::string& text, const ServerLimits& limits = test_limits()) {
  return expect_api_error([&] { parse(text, limits); });
}

const char* kTool = R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}})";

std::string with_tools(const std::string& extra) {
  return std::string(R"({"messages": [{"role": "user", "content": "hi"}], "tools": [)") + kTool + "]" + extra + "}";
}

TEST(ChatRequest, Defaults) {
  const ChatRequest r = parse(R"({"messages": [{"role": "user", "content": "Hello"}]})");
  EXPECT_EQ(r.messages, Json::parse(R"([{"role": "user", "content": "Hello"}])"));
  EXPECT_TRUE(r.tools.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoice::kNone);
  EXPECT_TRUE(r.add_generation_prompt);
  EXPECT_FALSE(r.common.add_special_tokens);
  EXPECT_FALSE(r.requested_max_tokens());
  EXPECT_EQ(r.max_output_tokens(), 0);
  EXPECT_EQ(r.response_role, "assistant");
  EXPECT_FALSE(r.engine_logprobs());
}

TEST(ChatRequest, MissingMessages) {
  const ApiError e = error_of(R"({"model": "qwen3.6"})");
  EXPECT_EQ(e.param, "body.messages");
  EXPECT_EQ(e.message, "1 validation error:\n  {'type': 'missing', 'loc': 'body.messages', 'msg': 'Field required', "
                       "'input': '<dict of 1 items>'}");
}

TEST(ChatRequest, MaxCompletionTokensWins) {
  ChatRequest r = parse(R"({"messages": [], "max_tokens": 10, "max_completion_tokens": 20})");
  EXPECT_EQ(r.requested_max_tokens(), 20);
  EXPECT_EQ(r.max_tokens_param(), "max_completion_tokens");
  r = parse(R"({"messages": [], "max_tokens": 10})");
  EXPECT_EQ(r.requested_max_tokens(), 10);
  EXPECT_EQ(r.max_tokens_param(), "max_tokens");
}

TEST(ChatRequest, EmptyToolsArray) {
  const ApiError e = error_of(R"({"messages": [], "tools": []})");
  EXPECT_EQ(e.param, "tools");
  EXPECT_NE(e.message.find("Value error, `tools` must not be an empty array. Either provide at least one tool or omit "
                           "the field entirely. (parameter=tools)"),
            std::string::npos)
      << e.message;
}

TEST(ChatRequest, ToolChoiceWithoutTools) {
  const ApiError e = error_of(R"({"messages": [], "tool_choice": "auto"})");
  EXPECT_EQ(e.param, "tool_choice");
  EXPECT_NE(e.message.find("When using `tool_choice`, `tools` must be set. (parameter=tool_choice)"), std::string::npos);
  EXPECT_NO_THROW(parse(R"({"messages": [], "tool_choice": "none"})"));
}

TEST(ChatRequest, InvalidToolChoice) {
  ApiError e = error_of(with_tools(R"(, "tool_choice": "sometimes")"));
  EXPECT_NE(e.message.find("Invalid value for `tool_choice`: sometimes! Only named tools, \"none\", \"auto\" or "
                           "\"required\" are supported."),
            std::string::npos)
      << e.message;
  e = error_of(with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"));
  EXPECT_EQ(e.param, "tool_choice");
  EXPECT_NE(e.message.find("The tool specified in `tool_choice` does not match any of the specified `tools`"),
            std::string::npos);
  e = error_of(with_tools(R"(, "tool_choice": {"type": "function"})"));
  EXPECT_EQ(e.param, "tool_choice.function");
  e = error_of(with_tools(R"(, "tool_choice": {"type": "function", "function": {}})"));
  EXPECT_EQ(e.param, "tool_choice.function.name");
  EXPECT_NE(e.message.find("Expected field `name` in `function` in `tool_choice`! Correct usage: `{\"type\": "
                           "\"function\", \"function\": {\"name\": \"my_function\"}}`"),
            std::string::npos)
      << e.message;
}

TEST(ChatRequest, ToolsDefaultToAutoAndNeedTheFlag) {
  const ChatRequest r = parse(with_tools(""));
  EXPECT_EQ(r.tool_choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.auto_tools());
  EXPECT_EQ(r.tools, Json::parse(R"([{"type": "function", "function": {"name": "get_weather", "description": null,
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])"));
  ServerLimits no_auto = test_limits();
  no_auto.enable_auto_tool_choice = false;
  const ApiError e = error_of(with_tools(""), no_auto);
  EXPECT_EQ(e.message, "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  EXPECT_FALSE(e.param);
  // tool_choice "none" with tools is fine without the flag.
  EXPECT_EQ(parse(with_tools(R"(, "tool_choice": "none")"), no_auto).tool_choice, ToolChoice::kNone);
}

TEST(ChatRequest, RequiredAndNamedToolChoiceConstrainTheOutput) {
  // openai_structured_outputs_test.cpp checks the schemas; here only that they reach the request.
  ChatRequest r = parse(with_tools(R"(, "tool_choice": "required")"));
  EXPECT_EQ(r.tool_choice, ToolChoice::kRequired);
  ASSERT_TRUE(r.common.structured_outputs && r.common.structured_outputs->json);
  EXPECT_EQ((*r.common.structured_outputs->json)["type"], "array");
  r = parse(with_tools(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  ASSERT_TRUE(r.common.structured_outputs && r.common.structured_outputs->json);
  EXPECT_EQ((*r.common.structured_outputs->json)["properties"]["city"]["type"], "string");
}

TEST(ChatRequest, TopLogprobs) {
  ApiError e = error_of(R"({"messages": [], "top_logprobs": 2})");
  EXPECT_EQ(e.param, "top_logprobs");
  EXPECT_NE(e.message.find("when using `top_logprobs`, `logprobs` must be set to true. (parameter=top_logprobs)"),
            std::string::npos);
  e = error_of(R"({"messages": [], "logprobs": true, "top_logprobs": -3})");
  EXPECT_NE(e.message.find("`top_logprobs` must be a positive value or -1. (parameter=top_logprobs, value=-3)"),
            std::string::npos);
  const ChatRequest r = parse(R"({"messages": [], "logprobs": true, "top_logprobs": 3})");
  EXPECT_EQ(r.engine_logprobs(), 3);
  EXPECT_EQ(parse(R"({"messages": [], "logprobs": true})").engine_logprobs(), 0);
}

TEST(ChatRequest, ContinueFinalMessage) {
  ApiError e = error_of(R"({"messages": [], "continue_final_message": true, "add_generation_prompt": true})");
  EXPECT_EQ(e.param, "body");
  EXPECT_NE(e.message.find("Cannot set both `continue_final_message` and `add_generation_prompt` to True."),
            std::string::npos);
  // add_generation_prompt defaults to true: transformers refuses the pair.
  e = error_of(R"({"messages": [{"role": "assistant", "content": "Hi"}], "continue_final_message": true})");
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_NE(e.message.find("continue_final_message and add_generation_prompt are not compatible"), std::string::npos);
  const ChatRequest r = parse(
      R"({"messages": [{"role": "assistant", "content": "Hi"}], "continue_final_message": true, "add_generation_prompt": false})");
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_EQ(r.response_role, "assistant");
}

TEST(ChatRequest, ContentPartsAreJoined) {
  const ChatRequest r = parse(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]})");
  EXPECT_EQ(r.messages[0]["content"], "a\nb");
  ChatParseOptions openai;
  openai.content_format = ContentFormat::kOpenAI;
  const ChatRequest o = parse(R"({"messages": [{"role": "user", "content": "a"}]})", test_limits(), openai);
  EXPECT_EQ(o.messages[0]["content"], Json::parse(R"([{"type": "text", "text": "a"}])"));
}

TEST(ChatRequest, ImagePartsBecomeTemplatePartsInOrder) {
  const ChatRequest r = parse(
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
          {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
          {"image_url": {"url": "data:image/png;base64,AAAA"}}, {"type": "text", "text": "b"}]}]})");
  ASSERT_EQ(r.images.size(), 2u);
  EXPECT_EQ(r.images[0].url, "https://x/y.png");
  EXPECT_EQ(r.images[0].detail, "low");
  EXPECT_EQ(r.images[1].url, "data:image/png;base64,AAAA");
  EXPECT_EQ(r.messages[0]["content"],
            Json::parse(R"([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "image"}, {"type": "text", "text": "b"}])"));
}

TEST(ChatRequest, MalformedImagePartsAndOtherMediaAreRefusedClearly) {
  ApiError e = error_of(R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "https://x"}]}]})");
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.message.find("needs an 'image_url' object with a string 'url'"), std::string::npos);
  e = error_of(R"({"messages": [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "https://x"}}]}]})");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  EXPECT_NE(e.message.find("'video_url'"), std::string::npos);
}

TEST(ChatRequest, UnknownPartTypeIsNotImplemented) {
  const ApiError e = error_of(R"({"messages": [{"role": "user", "content": [{"type": "hologram", "hologram": 1}]}]})");
  EXPECT_EQ(e.status, 501);
  EXPECT_EQ(e.type, "NotImplementedError");
  EXPECT_EQ(e.message, "Unknown part type: hologram");
}

TEST(ChatRequest, AssistantToolCallsAndReasoning) {
  const ChatRequest r = parse(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "reasoning_content": "think",
       "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
                      {"id": "c2", "type": "function", "function": {"name": "noop", "arguments": ""}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "sunny", "name": "get_weather"}]})");
  const Json& a = r.messages[1];
  EXPECT_EQ(a["content"], "");
  EXPECT_EQ(a["tool_calls"][0]["function"]["arguments"], Json::parse(R"({"city": "Paris"})"));
  EXPECT_EQ(a["tool_calls"][1]["function"]["arguments"], Json::object());
  EXPECT_EQ(a["reasoning"], "think");
  EXPECT_EQ(a["reasoning_content"], "think");
  EXPECT_EQ(r.messages[2], Json::parse(R"({"role": "tool", "content": "sunny", "tool_call_id": "c1", "name": "get_weather"})"));
}

TEST(ChatRequest, BadToolCallArgumentsJson) {
  const ApiError e = error_of(R"({"messages": [{"role": "assistant", "content": "",
      "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]}]})");
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_EQ(e.message, "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)");
}

TEST(ChatRequest, MessageFaults) {
  ApiError e = error_of(R"({"messages": [{"content": "x"}]})");
  EXPECT_EQ(e.param, "body.messages.0.role");
  e = error_of(R"({"messages": "hi"})");
  EXPECT_EQ(e.param, "body.messages");
}

TEST(ChatRequest, TemplateKwargs) {
  ChatParseOptions options;
  options.default_chat_template_kwargs = Json::parse(R"({"enable_thinking": true, "preserve_thinking": true})");
  ChatRequest r = parse(R"({"messages": [], "chat_template_kwargs": {"enable_thinking": false, "x": null}})", test_limits(),
                        options);
  EXPECT_EQ(r.chat_template_kwargs, Json::parse(R"({"enable_thinking": false, "preserve_thinking": true})"));
  r = parse(R"({"messages": [], "reasoning_effort": "none"})");
  EXPECT_EQ(r.chat_template_kwargs, Json::parse(R"({"reasoning_effort": "none", "enable_thinking": false})"));
  r = parse(R"({"messages": [], "reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": false}})");
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  // Named arguments of apply_chat_template never reach the template's variables.
  r = parse(R"({"messages": [], "chat_template_kwargs": {"add_generation_prompt": false, "tools": []}})");
  EXPECT_EQ(r.chat_template_kwargs, Json::object());
  const ApiError e = error_of(R"({"messages": [], "reasoning_effort": "extreme"})");
  EXPECT_EQ(e.param, "body.reasoning_effort");
}

TEST(ChatRequest, RequestChatTemplateNeedsTrust) {
  const std::string refused =
      "Chat template is passed with request, but --trust-request-chat-template is not set. Refused request "
      "with untrusted chat template.";
  ApiError e = error_of(R"({"messages": [], "chat_template": "{{ x }}"})");
  EXPECT_EQ(e.body(), R"({"error":{"message":")" + refused + R"(","type":"BadRequestError","param":null,"code":400}})");
  // "" is still a template passed with the request; so is one hidden in chat_template_kwargs.
  EXPECT_EQ(error_of(R"({"messages": [], "chat_template": ""})").message, refused);
  EXPECT_EQ(error_of(R"({"messages": [], "chat_template_kwargs": {"chat_template": "{{ x }}"}})").message, refused);
  EXPECT_FALSE(parse(R"({"messages": [], "chat_template": null})").chat_template);

  ServerLimits trusted = test_limits();
  trusted.trust_request_chat_template = true;
  const ChatRequest r = parse(R"({"messages": [], "chat_template": "{{ x }}"})", trusted);
  EXPECT_EQ(r.chat_template, "{{ x }}");
  // With the flag, a template in the kwargs is still apply_chat_template's own argument: vLLM's
  // resolve_chat_template_kwargs refuses it, and `tokenize` with or without the flag.
  e = error_of(R"({"messages": [], "chat_template_kwargs": {"chat_template": "{{ x }}"}})", trusted);
  EXPECT_EQ(e.message, "Found unexpected chat template kwargs from request: {'chat_template'}");
  EXPECT_EQ(e.type, "BadRequestError");
  e = error_of(R"({"messages": [], "chat_template_kwargs": {"tokenize": true, "enable_thinking": false}})");
  EXPECT_EQ(e.message, "Found unexpected chat template kwargs from request: {'tokenize'}");
  // merge_kwargs drops None overrides before the check, as vLLM's does.
  EXPECT_NO_THROW(parse(R"({"messages": [], "chat_template_kwargs": {"tokenize": null}})"));
  e = error_of(R"({"messages": [], "chat_template": 5})", trusted);
  EXPECT_EQ(e.param, "body.chat_template");
}

TEST(ChatRequest, ResponseFormat) {
  EXPECT_FALSE(parse(R"({"messages": [], "response_format": {"type": "text"}})").common.structured_outputs);
  const ChatRequest r = parse(R"({"messages": [], "response_format": {"type": "json_object"}})");
  ASSERT_TRUE(r.common.response_format);
  EXPECT_EQ(r.common.response_format->type, "json_object");
}

TEST(ChatRequest, EchoPrefix) {
  ChatRequest r = parse(R"({"messages": [{"role": "assistant", "content": "Once"}], "echo": true, "add_generation_prompt": false})");
  EXPECT_EQ(r.echo_prefix(), "Once");
  r = parse(R"({"messages": [{"role": "user", "content": "Once"}], "echo": true})");
  EXPECT_EQ(r.echo_prefix(), "");
}

TEST(ChatRequest, SamplingUsesTopLogprobs) {
  const ChatRequest r = parse(R"({"messages": [], "logprobs": true, "top_logprobs": 2, "temperature": 0.6})");
  const auto p = to_sampling_params(r, 100, {}, test_limits());
  EXPECT_EQ(p.logprobs, 2);
  EXPECT_EQ(p.temperature, 0.6);
  EXPECT_EQ(p.max_tokens, 100);
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

// Odd bodies never escape as anything but an ApiException (a 4xx answer).
TEST(RequestParsers, OddBodiesOnlyEverGiveApiErrors) {
  const char* bodies[] = {
      "null", "1", "\"s\"", "[]", "{", "{}", R"({"messages": null})", R"({"messages": [null]})",
      R"({"messages": [{"role": 1}]})", R"({"messages": [{"role": "user", "content": 5}]})",
      R"({"messages": [{"role": "user", "content": [5]}]})", R"({"messages": [{"role": "user", "content": [{"type": 5}]}]})",
      R"({"messages": [{"role": "assistant", "tool_calls": [1, {"function": 3}]}]})",
      R"({"messages": [], "tools": [1]})", R"({"messages": [], "tools": [{"function": {"name": 3}}]})",
      R"({"messages": [], "tool_choice": {"function": "x"}, "tools": [{"type": "function", "function": {"name": "f"}}]})",
      R"({"messages": [], "stream_options": 5, "stream": true})", R"({"messages": [], "logit_bias": [1]})",
      R"({"messages": [], "top_logprobs": true, "logprobs": true})", R"({"messages": [], "response_format": 3})",
      R"({"messages": [], "stop": [1, 2]})", R"({"messages": [], "seed": 1e30})", R"({"messages": [], "n": "x"})",
      R"({"prompt": {"a": 1}})", R"({"prompt": [[1], "a"]})", R"({"prompt": [1.5]})", R"({"prompt": "x", "logprobs": true})",
      R"({"prompt": "x", "prompt_logprobs": "a"})", R"({"prompt": "x", "truncation_side": "middle"})",
      R"({"prompt": "x", "truncate_prompt_tokens": -5})", R"({"prompt": "x", "seed": 18446744073709551615})",
  };
  for (const char* body : bodies) {
    for (int endpoint = 0; endpoint < 2; ++endpoint) {
      try {
        if (endpoint == 0) parse_chat_request(std::string_view(body), test_limits());
        else parse_completion_request(std::string_view(body), test_limits());
      } catch (const ApiException& e) {
        EXPECT_GE(e.error().status, 400) << body;
        EXPECT_LT(e.error().status, 500) << body;
      } catch (const std::exception& e) {
        ADD_FAILURE() << body << " escaped as " << e.what();
      }
    }
  }
}

}  // namespace
}  // namespace fp4serve::server::openai
