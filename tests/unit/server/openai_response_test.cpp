// Response shapes against literals (docs/vllm-surface.md §1.7-1.9, vLLM's serving code), logprobs in
// both endpoint shapes, streams and SSE framing.
#include <gtest/gtest.h>

#include "server/openai/chat_response.h"
#include "server/openai/completion_response.h"
#include "server/openai/logprobs_format.h"
#include "openai_test_support.h"  // NOLINT
#include "openai_test_tokenizer.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;
using testing::tiny_tokenizer;

ResponseContext context(const std::string& id) {
  ResponseContext c;
  c.id = id;
  c.created = 1730000000;
  c.model = "qwen3.6";
  c.tokenizer = &tiny_tokenizer();
  return c;
}

CompletionRequest completion(const std::string& body) {
  return parse_completion_request(std::string_view(body), test_limits());
}

ChatRequest chat(const std::string& body) { return parse_chat_request(std::string_view(body), test_limits()); }

engine::SampleLogprobs lp(int32_t sampled, float logprob, std::vector<engine::TokenLogprob> top) {
  engine::SampleLogprobs s;
  s.sampled = {sampled, logprob};
  s.top = std::move(top);
  return s;
}

TEST(CompletionResponse, MatchesTheSpecShape) {
  const CompletionRequest req = completion(R"({"prompt": "Hi"})");
  CompletionPromptResult result;
  result.prompt_text = "Hi";
  result.prompt_token_ids = {72, 105};
  CompletionSequence seq;
  seq.text = " there";
  seq.token_ids = {32, 116};
  seq.finish_reason = "length";
  result.sequences.push_back(seq);
  const Json out = build_completion_response(req, {result}, context("cmpl-abc"));
  EXPECT_EQ(dump_json(out),
            R"({"id":"cmpl-abc","object":"text_completion","created":1730000000,"model":"qwen3.6","choices":[{"index":0,"text":" there","logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":2,"total_tokens":4,"completion_tokens":2,"prompt_tokens_details":null},"kv_transfer_params":null})");
}

TEST(CompletionResponse, StopReasonEchoTokenIdsAndCachedTokens) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "echo": true, "return_token_ids": true, "n": 2})");
  CompletionPromptResult result;
  result.prompt_text = "Hi";
  result.prompt_token_ids = {72, 105};
  result.num_cached_tokens = 2;
  CompletionSequence a;
  a.text = "!";
  a.token_ids = {33};
  a.finish_reason = "stop";
  a.stop_reason = std::string("\n");
  CompletionSequence b = a;
  b.stop_reason = std::int64_t{300};
  result.sequences = {a, b};
  ResponseContext ctx = context("cmpl-x");
  ctx.enable_prompt_tokens_details = true;
  const Json out = build_completion_response(req, {result}, ctx);
  // With return_token_ids vLLM echoes "" as the prompt text (kept as is).
  EXPECT_EQ(out["choices"][0]["text"], "!");
  EXPECT_EQ(out["choices"][0]["stop_reason"], "\n");
  EXPECT_EQ(out["choices"][1]["stop_reason"], 300);
  EXPECT_EQ(out["choices"][1]["index"], 1);
  EXPECT_EQ(out["choices"][0]["token_ids"], Json::parse("[33]"));
  EXPECT_EQ(out["choices"][0]["prompt_token_ids"], Json::parse("[72, 105]"));
  EXPECT_EQ(dump_json(out["usage"]),
            R"({"prompt_tokens":2,"total_tokens":4,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":2}})");
}

TEST(CompletionResponse, EchoPrependsThePrompt) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "echo": true})");
  CompletionPromptResult result{"Hi", {72, 105}, 0, {CompletionSequence{" you", {32, 121}, {}, "length", {}}}};
  EXPECT_EQ(build_completion_response(req, {result}, context("c"))["choices"][0]["text"], "Hi you");
  const CompletionRequest only = completion(R"({"prompt": "Hi", "echo": true, "max_tokens": 0})");
  const Json out = build_completion_response(only, {result}, context("c"));
  EXPECT_EQ(out["choices"][0]["text"], "Hi");
  EXPECT_EQ(out["usage"]["completion_tokens"], 2);  // vLLM counts the generated tokens anyway
}

TEST(CompletionResponse, GenerationErrorIs500) {
  const CompletionRequest req = completion(R"({"prompt": "Hi"})");
  CompletionPromptResult result{"Hi", {72}, 0, {CompletionSequence{"", {}, {}, "error", {}}}};
  const ApiError e = expect_api_error([&] { build_completion_response(req, {result}, context("c")); });
  EXPECT_EQ(e.body(), R"({"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}})");
}

TEST(Logprobs, CompletionShape) {
  const auto& tok = tiny_tokenizer();
  // Token 259 "hello" sampled at rank 2; top-2 are 258 "hell" and 259.
  std::vector<int32_t> ids = {259, 33};
  std::vector<engine::SampleLogprobs> lps = {
      lp(259, -0.5f, {{258, -0.25f}, {259, -0.5f}}),
      lp(33, -1.0f, {{33, -1.0f}, {63, -2.0f}}),
  };
  const Json out = completion_logprobs_json(tok, ids, lps, 1, 0, false);
  EXPECT_EQ(dump_json(out),
            R"({"text_offset":[0,5],"token_logprobs":[-0.5,-1.0],"tokens":["hello","!"],"top_logprobs":[{"hello":-0.5,"hell":-0.25},{"!":-1.0,"?":-2.0}]})");
  // num_top 0: only the sampled token; offsets continue from the stream's text length.
  const Json zero = completion_logprobs_json(tok, ids, lps, 0, 10, false);
  EXPECT_EQ(dump_json(zero["top_logprobs"]), R"([{"hello":-0.5},{"!":-1.0}])");
  EXPECT_EQ(dump_json(zero["text_offset"]), "[10,15]");
  const Json as_ids = completion_logprobs_json(tok, ids, lps, 0, 0, true);
  EXPECT_EQ(dump_json(as_ids["tokens"]), R"(["token_id:259","token_id:33"])");
}

TEST(Logprobs, NegativeInfinityIsClamped) {
  const auto& tok = tiny_tokenizer();
  std::vector<int32_t> ids = {33};
  std::vector<engine::SampleLogprobs> lps = {lp(33, -INFINITY, {})};
  EXPECT_EQ(completion_logprobs_json(tok, ids, lps, 0, 0, false)["token_logprobs"][0], -9999.0);
}

TEST(Logprobs, ChatShape) {
  const auto& tok = tiny_tokenizer();
  std::vector<int32_t> ids = {259, 195};  // 195 = byte 0xC3: half a character
  std::vector<engine::SampleLogprobs> lps = {
      lp(259, -0.5f, {{258, -0.25f}, {259, -0.5f}}),
      lp(195, -1.5f, {{195, -1.5f}}),
  };
  const Json out = chat_logprobs_json(tok, ids, lps, 2, false);
  EXPECT_EQ(dump_json(out),
            R"({"content":[{"token":"hello","logprob":-0.5,"bytes":[104,101,108,108,111],"top_logprobs":[{"token":"hello","logprob":-0.5,"bytes":[104,101,108,108,111]},{"token":"hell","logprob":-0.25,"bytes":[104,101,108,108]}]},{"token":"�","logprob":-1.5,"bytes":[239,191,189],"top_logprobs":[{"token":"�","logprob":-1.5,"bytes":[239,191,189]}]}]})");
  EXPECT_EQ(chat_logprobs_json(tok, ids, lps, 0, false)["content"][0]["top_logprobs"], Json::array());
  EXPECT_EQ(chat_logprobs_json(tok, ids, lps, -1, false)["content"][0]["top_logprobs"].size(), 2u);
}

TEST(ChatResponse, MatchesTheSpecShape) {
  const ChatRequest req = chat(R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ChatResult result;
  result.prompt_token_ids = {1, 2, 3};
  ChatSequence seq;
  seq.message.reasoning = "think";
  seq.message.content = "Hello!";
  seq.token_ids = {4, 5};
  seq.finish_reason = "stop";
  seq.stop_reason = std::int64_t{300};
  result.sequences.push_back(seq);
  const Json out = build_chat_response(req, result, context("chatcmpl-abc"));
  EXPECT_EQ(dump_json(out),
            R"({"id":"chatcmpl-abc","object":"chat.completion","created":1730000000,"model":"qwen3.6","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!","refusal":null,"annotations":null,"audio":null,"function_call":null,"reasoning":"think"},"logprobs":null,"finish_reason":"stop","stop_reason":300,"token_ids":null}],"service_tier":null,"system_fingerprint":null,"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2,"prompt_tokens_details":null},"prompt_logprobs":null,"prompt_token_ids":null,"kv_transfer_params":null})");
}

TEST(ChatResponse, ToolCallsAndFinishReason) {
  const std::string tools = R"({"messages": [{"role": "user", "content": "w?"}], "tools": [{"type": "function", "function": {"name": "get_weather"}}])";
  const ChatRequest req = chat(tools + "}");
  ChatResult result;
  result.prompt_token_ids = {1};
  ChatSequence seq;
  seq.message.content = std::nullopt;
  seq.message.tool_calls = {ToolCall{"chatcmpl-tool-1", "get_weather", R"({"city": "Paris"})"},
                            ToolCall{"chatcmpl-tool-2", "get_weather", R"({"city": "Rome"})"}};
  seq.token_ids = {4};
  seq.finish_reason = "length";  // vLLM reports tool_calls even then
  result.sequences.push_back(seq);
  Json out = build_chat_response(req, result, context("c"));
  EXPECT_EQ(dump_json(out["choices"][0]["message"]),
            R"({"role":"assistant","content":null,"refusal":null,"annotations":null,"audio":null,"function_call":null,"tool_calls":[{"id":"chatcmpl-tool-1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},{"id":"chatcmpl-tool-2","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Rome\"}"}}],"reasoning":null})");
  EXPECT_EQ(out["choices"][0]["finish_reason"], "tool_calls");
  const ChatRequest single = chat(tools + R"(, "parallel_tool_calls": false})");
  out = build_chat_response(single, result, context("c"));
  EXPECT_EQ(out["choices"][0]["message"]["tool_calls"].size(), 1u);
  // A fresh id when the parser gave none.
  result.sequences[0].message.tool_calls[0].id.clear();
  out = build_chat_response(req, result, context("c"));
  EXPECT_EQ(out["choices"][0]["message"]["tool_calls"][0]["id"].get<std::string>().rfind("chatcmpl-tool-", 0), 0u);
}

TEST(ChatResponse, IncludeReasoningFalseAndEcho) {
  ChatRequest req = chat(R"({"messages": [{"role": "user", "content": "Hi"}], "include_reasoning": false, "logprobs": true})");
  ChatResult result{{1}, 0, {ChatSequence{{std::string("r"), std::string("c"), {}}, {33}, {lp(33, -1.f, {})}, "stop", {}}}};
  Json out = build_chat_response(req, result, context("c"), /*reasoning_parser=*/true);
  EXPECT_TRUE(out["choices"][0]["message"]["reasoning"].is_null());
  EXPECT_TRUE(out["choices"][0]["logprobs"].is_null());
  req = chat(R"({"messages": [{"role": "assistant", "content": "Once"}], "echo": true, "add_generation_prompt": false})");
  out = build_chat_response(req, result, context("c"));
  EXPECT_EQ(out["choices"][0]["message"]["content"], "Oncec");
}

TEST(ChatResponse, ReasoningContentAlias) {
  const ChatRequest req = chat(R"({"messages": []})");
  ChatResult result{{1}, 0, {ChatSequence{{std::string("r"), std::string("c"), {}}, {33}, {}, "stop", {}}}};
  ResponseContext ctx = context("c");
  ctx.emit_reasoning_content = true;
  const Json msg = build_chat_response(req, result, ctx)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning"], "r");
  EXPECT_EQ(msg["reasoning_content"], "r");
}

engine::SequenceDelta delta(int index, std::vector<int32_t> ids, std::string text, std::string finish = "",
                            engine::StopReason stop = {}) {
  engine::SequenceDelta d;
  d.index = index;
  d.token_ids = std::move(ids);
  d.text = std::move(text);
  d.finish_reason = std::move(finish);
  d.stop_reason = std::move(stop);
  return d;
}

TEST(ChatStream, EventsAsVllmSendsThem) {
  const ChatRequest req = chat(R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true, "stream_options": {"include_usage": true}})");
  ChatStream stream(req, context("chatcmpl-s"));
  std::string sse = stream.start(3, 0);
  EXPECT_EQ(sse,
            "data: {\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n");
  EXPECT_EQ(stream.start(3, 0), "");  // once
  sse = stream.on_delta(delta(0, {72}, "H"), ChatDeltaParts{std::nullopt, std::string("H"), {}});
  EXPECT_EQ(sse,
            "data: {\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"H\"},\"logprobs\":null,\"finish_reason\":null,\"token_ids\":null}]}\n\n");
  sse = stream.on_delta(delta(0, {105}, "i", "stop", std::int64_t{300}), ChatDeltaParts{std::string("r"), std::string("i"), {}});
  EXPECT_EQ(sse,
            "data: {\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"i\",\"reasoning\":\"r\"},\"logprobs\":null,\"finish_reason\":\"stop\","
            "\"stop_reason\":300,\"token_ids\":null}]}\n\n");
  EXPECT_EQ(stream.finish(),
            "data: {\"id\":\"chatcmpl-s\",\"object\":\"chat.completion.chunk\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"total_tokens\":5,\"completion_tokens\":2}}\n\n"
            "data: [DONE]\n\n");
  EXPECT_TRUE(stream.done());
}

TEST(ChatStream, EmptyDeltasAndParserHoldBack) {
  const ChatRequest req = chat(R"({"messages": [], "stream": true})");
  ChatStream stream(req, context("c"));
  stream.start(1, 0);
  EXPECT_EQ(stream.on_delta(delta(0, {}, ""), ChatDeltaParts{}), "");  // chunked prefill
  EXPECT_EQ(stream.on_delta(delta(0, {5}, "<"), ChatDeltaParts{}), "");  // parser holds back
  const std::string fin = stream.on_delta(delta(0, {6}, "", "length"), ChatDeltaParts{});
  EXPECT_NE(fin.find("\"delta\":{}"), std::string::npos) << fin;
  EXPECT_NE(fin.find("\"finish_reason\":\"length\""), std::string::npos);
  EXPECT_EQ(stream.finish(), "data: [DONE]\n\n");  // no usage chunk without stream_options
}

TEST(ChatStream, ToolCallDeltasAndFinishReason) {
  const ChatRequest req = chat(
      R"({"messages": [], "stream": true, "tools": [{"type": "function", "function": {"name": "f"}}]})");
  ChatStream stream(req, context("c"));
  stream.start(1, 0);
  ChatDeltaParts first;
  first.tool_calls = {ToolCallDelta{0, std::string("call_1"), std::string("f"), ""}};
  std::string sse = stream.on_delta(delta(0, {1}, "<tool_call>"), first);
  EXPECT_NE(sse.find(R"("delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":""}}]})"),
            std::string::npos)
      << sse;
  ChatDeltaParts args;
  args.tool_calls = {ToolCallDelta{0, std::nullopt, std::nullopt, "{}"}};
  sse = stream.on_delta(delta(0, {2}, "x", "stop"), args);
  EXPECT_NE(sse.find(R"("tool_calls":[{"index":0,"function":{"arguments":"{}"}}])"), std::string::npos) << sse;
  EXPECT_NE(sse.find(R"("finish_reason":"tool_calls")"), std::string::npos);
}

TEST(ChatStream, ContinuousUsageEchoAndN) {
  const ChatRequest req = chat(R"({"messages": [{"role": "assistant", "content": "Once"}], "add_generation_prompt": false,
      "echo": true, "n": 2, "stream": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  ChatStream stream(req, context("c"));
  const std::string start = stream.start(4, 0);
  // Role chunks for both choices, then the echo chunks.
  EXPECT_NE(start.find(R"("choices":[{"index":1,"delta":{"role":"assistant","content":""})"), std::string::npos) << start;
  EXPECT_NE(start.find(R"("choices":[{"index":0,"delta":{"content":"Once"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":4,"total_tokens":4,"completion_tokens":0})"),
            std::string::npos)
      << start;
  const std::string sse = stream.on_delta(delta(1, {9, 9}, " upon"), ChatDeltaParts{std::nullopt, std::string(" upon"), {}});
  EXPECT_NE(sse.find(R"("usage":{"prompt_tokens":4,"total_tokens":6,"completion_tokens":2})"), std::string::npos) << sse;
}

TEST(ChatStream, ErrorsMidStream) {
  const ChatRequest req = chat(R"({"messages": [], "stream": true})");
  ChatStream stream(req, context("c"));
  stream.start(1, 0);
  EXPECT_EQ(stream.on_delta(delta(0, {1}, "x", "error"), ChatDeltaParts{}),
            "data: {\"error\":{\"message\":\"Internal server error\",\"type\":\"InternalServerError\",\"param\":null,\"code\":500}}\n\n"
            "data: [DONE]\n\n");
  EXPECT_TRUE(stream.done());
  EXPECT_EQ(stream.finish(), "");
  ChatStream other(req, context("c"));
  EXPECT_EQ(other.fail(value_error("boom")),
            "data: {\"error\":{\"message\":\"boom\",\"type\":\"BadRequestError\",\"param\":null,\"code\":400}}\n\n"
            "data: [DONE]\n\n");
}

engine::RequestOutput output(std::vector<engine::SequenceDelta> deltas, int prompt_tokens) {
  engine::RequestOutput out;
  out.deltas = std::move(deltas);
  out.num_prompt_tokens = prompt_tokens;
  out.finished = !out.deltas.empty() && out.deltas.back().finished();
  return out;
}

TEST(CompletionStream, EventsAsVllmSendsThem) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "stream": true, "stream_options": {"include_usage": true}})");
  CompletionStream stream(req, context("cmpl-s"));
  const std::vector<int32_t> prompt = {72, 105};
  std::string sse = stream.on_output(0, "Hi", prompt, output({delta(0, {32}, " ")}, 2));
  EXPECT_EQ(sse,
            "data: {\"id\":\"cmpl-s\",\"object\":\"text_completion\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[{\"index\":0,\"text\":\" \",\"logprobs\":null,\"finish_reason\":null,\"stop_reason\":null}]}\n\n");
  sse = stream.on_output(0, "Hi", prompt, output({delta(0, {}, "", "stop")}, 2));
  EXPECT_NE(sse.find(R"("finish_reason":"stop","stop_reason":null)"), std::string::npos) << sse;
  EXPECT_EQ(stream.finish(),
            "data: {\"id\":\"cmpl-s\",\"object\":\"text_completion\",\"created\":1730000000,\"model\":\"qwen3.6\","
            "\"choices\":[],\"usage\":{\"prompt_tokens\":2,\"total_tokens\":3,\"completion_tokens\":1}}\n\n"
            "data: [DONE]\n\n");
}

TEST(CompletionStream, EchoLogprobsOffsetsAndSeveralPrompts) {
  const CompletionRequest req = completion(R"({"prompt": ["a", "b"], "stream": true, "logprobs": 0,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  CompletionStream stream(req, context("c"));
  engine::SequenceDelta d = delta(0, {259}, "hello");
  d.logprobs = {lp(259, -0.5f, {})};
  std::string sse = stream.on_output(1, "b", {98}, output({d}, 1));
  EXPECT_NE(sse.find(R"("index":1,"text":"hello","logprobs":{"text_offset":[0],"token_logprobs":[-0.5],"tokens":["hello"],"top_logprobs":[{"hello":-0.5}]})"),
            std::string::npos)
      << sse;
  EXPECT_NE(sse.find(R"("usage":{"prompt_tokens":1,"total_tokens":2,"completion_tokens":1})"), std::string::npos);
  d = delta(0, {33}, "!", "length");
  d.logprobs = {lp(33, -1.f, {})};
  sse = stream.on_output(1, "b", {98}, output({d}, 1));
  EXPECT_NE(sse.find(R"("text_offset":[5])"), std::string::npos) << sse;
}

TEST(CompletionStream, EchoFirstChunkCarriesThePrompt) {
  const CompletionRequest req = completion(R"({"prompt": "Hi", "stream": true, "echo": true})");
  CompletionStream stream(req, context("c"));
  std::string sse = stream.on_output(0, "Hi", {72, 105}, output({delta(0, {33}, "!")}, 2));
  EXPECT_NE(sse.find(R"("text":"Hi!")"), std::string::npos) << sse;
  sse = stream.on_output(0, "Hi", {72, 105}, output({delta(0, {33}, "!", "length")}, 2));
  EXPECT_NE(sse.find(R"("text":"!")"), std::string::npos) << sse;
  EXPECT_EQ(stream.finish(), "data: [DONE]\n\n");
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_event(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(std::string(kSseDone), "data: [DONE]\n\n");
  EXPECT_EQ(sse_event(Json{{"t", "é"}}), "data: {\"t\":\"é\"}\n\n");  // UTF-8 kept, as ensure_ascii=False
}

TEST(ResponseIds, Forms) {
  EXPECT_EQ(make_response_id("cmpl-", std::string("req-1"), std::string("body")), "cmpl-req-1");
  EXPECT_EQ(make_response_id("chatcmpl-", std::nullopt, std::string("body")), "chatcmpl-body");
  const std::string id = make_response_id("cmpl-", std::nullopt, std::nullopt);
  EXPECT_EQ(id.size(), 5u + 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef", 5), std::string::npos);
}

}  // namespace
}  // namespace fp4serve::server::openai
