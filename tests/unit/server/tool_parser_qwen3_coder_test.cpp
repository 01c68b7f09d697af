// qwen3_coder tool-call parser: vLLM's tests (tests/tool_use/test_qwen3coder_tool_parser.py)
// transcribed, exact json.dumps argument strings, and streaming == non-streaming for every split.
#include "server/openai/tool_parser_qwen3_coder.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace fp4serve::server::openai {
namespace {

using json = nlohmann::ordered_json;

json sample_tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_current_weather", "description": "Get the current weather",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "state": {"type": "string", "description": "The state code"},
        "unit": {"type": "string", "enum": ["fahrenheit", "celsius"]}},
        "required": ["city", "state"]}}},
    {"type": "function", "function": {"name": "calculate_area", "description": "Calculate area of a shape",
      "parameters": {"type": "object", "properties": {
        "shape": {"type": "string"}, "dimensions": {"type": "object"}, "precision": {"type": "integer"}}}}}
  ])");
}

const char* kDallas =
    "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n"
    "</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>";
const char* kDallasArgs = R"({"city": "Dallas", "state": "TX", "unit": "fahrenheit"})";

struct Expected {
  const char* name;
  std::string output;
  std::vector<std::pair<std::string, std::string>> calls;  // name, exact arguments text
  std::optional<std::string> content;
};

const std::vector<Expected>& cases() {
  static const std::vector<Expected> c = {
      {"no_tools", "This is a test without tools", {}, "This is a test without tools"},
      {"single_tool", kDallas, {{"get_current_weather", kDallasArgs}}, std::nullopt},
      {"single_tool_with_content", std::string("Sure! Let me check the weather for you.") + kDallas,
       {{"get_current_weather", kDallasArgs}}, "Sure! Let me check the weather for you."},
      {"single_tool_multiline_param",
       "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n"
       "{\"width\": 10, \n \"height\": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n"
       "</tool_call>",
       {{"calculate_area", R"({"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2})"}},
       std::nullopt},
      {"parallel_tools",
       std::string(kDallas) +
           "\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nOrlando\n</parameter>\n"
           "<parameter=state>\nFL\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>",
       {{"get_current_weather", kDallasArgs},
        {"get_current_weather", R"({"city": "Orlando", "state": "FL", "unit": "celsius"})"}},
       std::nullopt},
      {"tool_with_typed_params",
       "Let me calculate that area for you.<tool_call>\n<function=calculate_area>\n<parameter=shape>\ncircle\n"
       "</parameter>\n<parameter=dimensions>\n{\"radius\": 15.5}\n</parameter>\n<parameter=precision>\n3\n"
       "</parameter>\n</function>\n</tool_call>",
       {{"calculate_area", R"({"shape": "circle", "dimensions": {"radius": 15.5}, "precision": 3})"}},
       "Let me calculate that area for you."},
      {"missing_closing_parameter_tag",
       "Let me check the weather for you:\n<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n"
       "<parameter=state>\nTX\n</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>",
       {{"get_current_weather", kDallasArgs}}, "Let me check the weather for you:\n"},
      {"unknown_function_and_param",
       "<tool_call>\n<function=other>\n<parameter=x>\n 12 \n</parameter>\n</function>\n</tool_call>",
       {{"other", R"({"x": " 12 "})"}}, std::nullopt},
      {"no_parameters", "<tool_call>\n<function=get_time>\n</function>\n</tool_call>", {{"get_time", "{}"}},
       std::nullopt},
      {"non_ascii_and_escapes",
       "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nZürich \"Altstadt\"\\n\tx\n</parameter>\n"
       "</function>\n</tool_call>",
       {{"get_current_weather", "{\"city\": \"Zürich \\\"Altstadt\\\"\\\\n\\tx\"}"}}, std::nullopt},
      {"invalid_name_dropped",
       "<tool_call>\n<function={{ tc.name }}>\n</function>\n</tool_call>", {}, std::nullopt},
      {"function_tag_in_prose_without_name_end", "I would call <function=", {}, "I would call "},
  };
  return c;
}

void expect_extraction(const Expected& e, const ToolCallExtraction& got) {
  ASSERT_EQ(got.tool_calls.size(), e.calls.size());
  EXPECT_EQ(got.tools_called, !e.calls.empty());
  for (std::size_t i = 0; i < e.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, e.calls[i].first);
    EXPECT_EQ(got.tool_calls[i].arguments, e.calls[i].second);
    EXPECT_EQ(got.tool_calls[i].id.rfind("chatcmpl-tool-", 0), 0u);
    EXPECT_EQ(got.tool_calls[i].id.size(), std::string("chatcmpl-tool-").size() + 32);
  }
  EXPECT_EQ(got.content, e.content);
}

TEST(Qwen3CoderToolParser, ExtractMatchesVllmCases) {
  for (const auto& e : cases()) {
    SCOPED_TRACE(e.name);
    expect_extraction(e, extract_qwen3_coder_tool_calls(e.output, sample_tools()));
  }
}

TEST(Qwen3CoderToolParser, FallbackWithoutToolCallTags) {
  const auto got = extract_qwen3_coder_tool_calls(
      "<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n</parameter>\n"
      "</function>",
      sample_tools());
  ASSERT_TRUE(got.tools_called);
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].name, "get_current_weather");
  EXPECT_EQ(got.tool_calls[0].arguments, R"({"city": "Dallas", "state": "TX"})");
  EXPECT_EQ(got.content, std::nullopt);
}

TEST(Qwen3CoderToolParser, TypeConversion) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "test_types", "parameters": {
    "type": "object", "properties": {"int_param": {"type": "integer"}, "float_param": {"type": "float"},
    "bool_param": {"type": "boolean"}, "str_param": {"type": "string"}, "obj_param": {"type": "object"}}}}}])");
  const auto got = extract_qwen3_coder_tool_calls(
      "<tool_call>\n<function=test_types>\n<parameter=int_param>\n42\n</parameter>\n<parameter=float_param>\n3.14\n"
      "</parameter>\n<parameter=bool_param>\ntrue\n</parameter>\n<parameter=str_param>\nhello world\n</parameter>\n"
      "<parameter=obj_param>\n{\"key\": \"value\"}\n</parameter>\n</function>\n</tool_call>",
      tools);
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].arguments,
            R"({"int_param": 42, "float_param": 3.14, "bool_param": true, "str_param": "hello world", "obj_param": {"key": "value"}})");
}

// Streams `deltas` and folds the fragments back together the way a client does.
struct Folded {
  std::string content;
  std::map<int, ToolCall> calls;
  int headers = 0;
  bool ok = true;
};

Folded stream(const std::vector<std::string>& deltas, const json& tools) {
  Qwen3CoderToolStreamParser parser(tools);
  Folded f;
  auto take = [&](const ToolStreamDelta& d) {
    f.content += d.content;
    for (const auto& tc : d.tool_calls) {
      auto& call = f.calls[tc.index];
      if (tc.id) {
        ++f.headers;
        if (!call.id.empty() || !tc.name || tc.id->rfind("call_", 0) != 0 || tc.id->size() != 29) f.ok = false;
        call.id = *tc.id;
        call.name = *tc.name;
      } else if (call.id.empty() || tc.name) {
        f.ok = false;  // arguments before the header, or a second name
      }
      call.arguments += tc.arguments;
    }
  };
  for (const auto& d : deltas) take(parser.feed(d));
  take(parser.finish());
  return f;
}

void expect_stream(const Expected& e, const Folded& f) {
  EXPECT_TRUE(f.ok);
  // Without any call, chat serving shows the whole output as content.
  EXPECT_EQ(f.content, e.calls.empty() ? e.output : e.content.value_or(""));
  ASSERT_EQ(f.calls.size(), e.calls.size());
  EXPECT_EQ(f.headers, static_cast<int>(e.calls.size()));
  for (std::size_t i = 0; i < e.calls.size(); ++i) {
    const auto& call = f.calls.at(static_cast<int>(i));
    EXPECT_EQ(call.name, e.calls[i].first);
    EXPECT_EQ(call.arguments, e.calls[i].second);
  }
}

TEST(Qwen3CoderToolParser, StreamingEqualsNonStreamingForEverySplit) {
  for (const auto& e : cases()) {
    for (std::size_t i = 0; i <= e.output.size(); ++i) {
      SCOPED_TRACE(std::string(e.name) + " split at " + std::to_string(i));
      expect_stream(e, stream({e.output.substr(0, i), e.output.substr(i)}, sample_tools()));
    }
  }
}

TEST(Qwen3CoderToolParser, StreamingCharacterByCharacterAndInChunks) {
  for (const auto& e : cases()) {
    for (std::size_t chunk : {1u, 2u, 5u, 7u}) {
      SCOPED_TRACE(std::string(e.name) + " chunk " + std::to_string(chunk));
      std::vector<std::string> deltas;
      for (std::size_t i = 0; i < e.output.size(); i += chunk) deltas.push_back(e.output.substr(i, chunk));
      expect_stream(e, stream(deltas, sample_tools()));
    }
  }
}

// vLLM's streaming shape: the header (id, type, name) comes first with "{", then one fragment per
// completed parameter, then "}" when </function> arrives.
TEST(Qwen3CoderToolParser, StreamingIsIncremental) {
  const std::string out =
      "I'll check the weather.<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n"
      "<parameter=state>\nTX\n</parameter>\n</function>\n</tool_call>";
  Qwen3CoderToolStreamParser parser(sample_tools());
  std::vector<ToolStreamDelta> chunks;
  for (char c : out) {
    auto d = parser.feed(std::string(1, c));
    if (!d.empty()) chunks.push_back(std::move(d));
  }
  auto tail = parser.finish();
  EXPECT_TRUE(tail.empty());
  ASSERT_GE(chunks.size(), 4u);
  EXPECT_FALSE(chunks[0].content.empty());
  EXPECT_TRUE(chunks[0].tool_calls.empty());
  std::vector<std::string> fragments;
  std::optional<ToolCallDelta> header;
  for (const auto& c : chunks) {
    for (const auto& tc : c.tool_calls) {
      if (tc.id) header = tc;
      fragments.push_back(tc.arguments);
    }
  }
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->name, "get_current_weather");
  EXPECT_EQ(header->arguments, "{");
  // The last parameter completes with </function>, so its fragment carries the closing brace too
  // (vLLM emits parameters, then "}", in the same delta).
  EXPECT_EQ(fragments, (std::vector<std::string>{"{", "\"city\": \"Dallas\"", ", \"state\": \"TX\"}"}));
  EXPECT_TRUE(parser.tools_called());
  const auto j = to_json(*header);
  EXPECT_EQ(j.at("type"), "function");
  EXPECT_EQ(j.at("function").at("name"), "get_current_weather");
  EXPECT_EQ(j.at("function").at("arguments"), "{");
  EXPECT_EQ(j.at("index"), 0);
  EXPECT_EQ(j.at("id").get<std::string>().rfind("call_", 0), 0u);
}

TEST(Qwen3CoderToolParser, UnterminatedCallIsCompletedAtEndOfGeneration) {
  // max_tokens cut the call short: extract_tool_calls parses what is there; the stream sends the
  // rest of the arguments and the closing brace from finish().
  const std::string out = "<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDal";
  const auto got = extract_qwen3_coder_tool_calls(out, sample_tools());
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].arguments, R"({"city": "Dal"})");
  const auto f = stream({out}, sample_tools());
  ASSERT_EQ(f.calls.size(), 1u);
  EXPECT_EQ(f.calls.at(0).arguments, R"({"city": "Dal"})");
}

TEST(Qwen3CoderToolParser, ParameterValueEmbeddingMarkupIsNotSplit) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}}}}])");
  const std::string inner = "<parameter=x>\n1\n</parameter>\nmore";
  const std::string out = "<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n"
                          "<parameter=content>\n" + inner + "\n</parameter>\n</function>\n</tool_call>";
  const auto got = extract_qwen3_coder_tool_calls(out, tools);
  ASSERT_EQ(got.tool_calls.size(), 1u);
  EXPECT_EQ(got.tool_calls[0].arguments,
            R"({"path": "a.txt", "content": "<parameter=x>\n1\n</parameter>\nmore"})");
  for (std::size_t i = 0; i <= out.size(); ++i) {
    const auto f = stream({out.substr(0, i), out.substr(i)}, tools);
    ASSERT_EQ(f.calls.size(), 1u) << i;
    EXPECT_EQ(f.calls.at(0).arguments, got.tool_calls[0].arguments) << i;
  }
}

TEST(Qwen3CoderToolParser, FinishReason) {
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kAuto, true), "tool_calls");
  EXPECT_EQ(chat_finish_reason("length", ToolChoice::kAuto, true), "tool_calls");
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kAuto, false), "stop");
  EXPECT_EQ(chat_finish_reason("length", ToolChoice::kNone, false), "length");
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kNamed, true), "stop");
  EXPECT_EQ(chat_finish_reason("stop", ToolChoice::kRequired, false), "tool_calls");
  EXPECT_EQ(chat_finish_reason("", ToolChoice::kNone, false), "stop");
  EXPECT_EQ(chat_stream_finish_reason("length", ToolChoice::kAuto, true), "tool_calls");
  EXPECT_EQ(chat_stream_finish_reason("length", ToolChoice::kRequired, true), "tool_calls");
  EXPECT_EQ(chat_stream_finish_reason("stop", ToolChoice::kNamed, true), "stop");
  EXPECT_EQ(chat_stream_finish_reason("length", ToolChoice::kAuto, false), "length");
}

TEST(Qwen3CoderToolParser, NonStreamingToolCallJson) {
  const ToolCall call{"chatcmpl-tool-abc", "f", "{}"};
  EXPECT_EQ(to_json(call).dump(), R"({"id":"chatcmpl-tool-abc","type":"function","function":{"name":"f","arguments":"{}"}})");
  const ToolCallDelta later{2, std::nullopt, std::nullopt, ", \"a\": 1"};
  EXPECT_EQ(to_json(later).dump(), R"({"index":2,"function":{"arguments":", \"a\": 1"}})");
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

// Random well-formed calls (random values, parameter order, surrounding text) stream exactly like
// extract(); random garbage built from the markup's pieces never crashes either path.
TEST(Qwen3CoderToolParser, RandomCallsStreamLikeNonStreaming) {
  std::uint64_t state = 99;
  auto next = [&](std::uint64_t n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % n;
  };
  const std::vector<std::string> values = {"Dallas", "TX", "12", "{\"a\": 1}", "x\ny", "<b>", "null", "",
                                           "</parameter", "a</function>b", "<parameter=z>"};
  const std::vector<std::string> params = {"city", "state", "unit", "extra"};
  for (int round = 0; round < 400; ++round) {
    std::string text = next(2) ? "Sure. " : "";
    const auto calls = 1 + next(3);
    std::vector<std::string> expected_args;
    for (std::uint64_t c = 0; c < calls; ++c) {
      text += "<tool_call>\n<function=get_current_weather>\n";
      const auto n = next(4);
      for (std::uint64_t p = 0; p < n; ++p) {
        text += "<parameter=" + params[p] + ">\n" + values[next(values.size())] + "\n</parameter>\n";
      }
      text += "</function>\n</tool_call>";
      if (c + 1 < calls) text += "\n";
    }
    const auto whole = extract_qwen3_coder_tool_calls(text, sample_tools());
    ASSERT_EQ(whole.tool_calls.size(), calls) << text;
    std::vector<std::string> deltas;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t n = 1 + next(9);
      deltas.push_back(text.substr(pos, n));
      pos += n;
    }
    const auto f = stream(deltas, sample_tools());
    ASSERT_TRUE(f.ok) << text;
    ASSERT_EQ(f.calls.size(), calls) << text;
    EXPECT_EQ(f.content, whole.content.value_or("")) << text;
    for (std::size_t i = 0; i < calls; ++i) {
      EXPECT_EQ(f.calls.at(static_cast<int>(i)).arguments, whole.tool_calls[i].arguments) << text;
      EXPECT_TRUE(json::accept(whole.tool_calls[i].arguments)) << whole.tool_calls[i].arguments;
    }
  }
  const std::vector<std::string> pieces = {"<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=",
                                           "</parameter>", "f", ">", "\n", " ", "1", "{{x}}", "city"};
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const auto len = next(16);
    for (std::uint64_t i = 0; i < len; ++i) text += pieces[next(pieces.size())];
    const auto whole = extract_qwen3_coder_tool_calls(text, sample_tools());
    for (const auto& call : whole.tool_calls) EXPECT_TRUE(json::accept(call.arguments)) << text;
    std::vector<std::string> deltas;
    for (std::size_t pos = 0; pos < text.size();) {
      const std::size_t n = 1 + next(5);
      deltas.push_back(text.substr(pos, n));
      pos += n;
    }
    const auto f = stream(deltas, sample_tools());
    EXPECT_TRUE(f.ok) << text;
  }
}

}  // namespace
}  // namespace fp4serve::server::openai
