// Parameter conversion of the qwen3_coder parser (vLLM's _convert_param_value) and the Python
// json.dumps / ast.literal_eval behaviour it relies on.
#include "server/openai/tool_parser_values.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/openai/tool_parser_qwen3_coder.h"

namespace fp4serve::server::openai {
namespace {

using json = nlohmann::ordered_json;

const json kProps = json::parse(R"({
  "s": {"type": "string"}, "e": {"type": "enum"}, "ns": {"anyOf": [{"type": "string"}, {"type": "null"}]},
  "i": {"type": "integer"}, "u": {"type": "uint32"}, "n": {"type": "number"}, "f": {"type": "float"},
  "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array"}, "d": {"type": "dict"},
  "nul": {"type": "null"}, "odd": {"type": "whatever"}, "list_t": {"type": ["integer", "null"]},
  "ni": {"anyOf": [{"type": "null"}, {"type": "integer"}]}, "notype": {"description": "x"}
})");

std::string conv(const std::string& value, const std::string& name) {
  return python_json_dumps(convert_param_value(value, name, kProps));
}

TEST(ToolParserValues, StringTypesKeepTheText) {
  EXPECT_EQ(conv("null", "s"), "\"null\"");  // string wins over the null literal
  EXPECT_EQ(conv(" 42 ", "s"), "\" 42 \"");
  EXPECT_EQ(conv("celsius", "e"), "\"celsius\"");
  EXPECT_EQ(conv("None", "ns"), "null");  // nullable string: None/null become JSON null
  EXPECT_EQ(conv("x", "ns"), "\"x\"");
  EXPECT_EQ(conv("12", "missing_from_schema"), "\"12\"");
  EXPECT_EQ(conv("12", "notype"), "\"12\"");
}

TEST(ToolParserValues, Integers) {
  EXPECT_EQ(conv("42", "i"), "42");
  EXPECT_EQ(conv(" -7 ", "i"), "-7");
  EXPECT_EQ(conv("1_000", "i"), "1000");
  EXPECT_EQ(conv("4.5", "i"), "\"4.5\"");  // int("4.5") fails: kept as text
  EXPECT_EQ(conv("null", "i"), "null");
  EXPECT_EQ(conv("None", "u"), "null");
  EXPECT_EQ(conv("7", "ni"), "7");
  EXPECT_EQ(conv("none", "ni"), "null");
}

TEST(ToolParserValues, Numbers) {
  EXPECT_EQ(conv("3.14", "f"), "3.14");
  EXPECT_EQ(conv("5.0", "n"), "5");  // integral floats become ints
  EXPECT_EQ(conv("1e3", "n"), "1000");
  EXPECT_EQ(conv("1e-5", "n"), "1e-05");
  EXPECT_EQ(conv("abc", "n"), "\"abc\"");
  EXPECT_EQ(conv("nan", "n"), "\"nan\"");  // int(nan) raises ValueError: kept as text
  EXPECT_THROW(conv("inf", "n"), ToolCallExtractionAborted);  // OverflowError escapes in vLLM
}

TEST(ToolParserValues, Booleans) {
  EXPECT_EQ(conv("true", "b"), "true");
  EXPECT_EQ(conv("True", "b"), "true");
  EXPECT_EQ(conv("FALSE", "b"), "false");
  EXPECT_EQ(conv("yes", "b"), "false");  // anything else degenerates to false
}

TEST(ToolParserValues, Containers) {
  EXPECT_EQ(conv("{\"a\": [1, 2.5, null]}", "o"), "{\"a\": [1, 2.5, null]}");
  EXPECT_EQ(conv("{'a': True, 'b': None}", "o"), "{\"a\": true, \"b\": null}");  // Python repr
  EXPECT_EQ(conv("\"{'k': 'v'}\"", "d"), "{\"k\": \"v\"}");  // JSON-encoded repr decoded twice
  EXPECT_EQ(conv("[1,2]", "a"), "[1, 2]");
  EXPECT_EQ(conv("(1, 'x')", "a"), "[1, \"x\"]");
  EXPECT_EQ(conv("not json", "a"), "\"not json\"");
}

TEST(ToolParserValues, OtherTypesGoThroughLiteralEval) {
  EXPECT_EQ(conv("123", "odd"), "123");
  EXPECT_EQ(conv("'quoted'", "odd"), "\"quoted\"");
  EXPECT_EQ(conv("hello world", "odd"), "\"hello world\"");
  EXPECT_EQ(conv("null", "nul"), "null");
  EXPECT_EQ(conv("[1]", "list_t"), "[1]");  // a list-valued "type" matches no known name
  EXPECT_EQ(conv("None", "list_t"), "null");
}

TEST(ToolParserValues, PythonJsonDumps) {
  const json v = json::parse(R"({"a": [1, -2, 0.5, 1e16, 100000.0, 1e-7], "b": {"c": "Zürich\n\u0001"}, "d": [], "e": {}})");
  EXPECT_EQ(python_json_dumps(v),
            "{\"a\": [1, -2, 0.5, 1e+16, 100000.0, 1e-07], \"b\": {\"c\": \"Zürich\\n\\u0001\"}, \"d\": [], \"e\": {}}");
  EXPECT_EQ(python_json_dumps(json(std::nan(""))), "NaN");
}

TEST(ToolParserValues, LiteralEval) {
  EXPECT_EQ(python_json_dumps(*python_literal_eval("(1)")), "1");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("(1,)")), "[1]");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("-1.5")), "-1.5");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("0x1F")), "31");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("'a' \"b\"")), "\"ab\"");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("'\\n\\x41'")), "\"\\nA\"");
  EXPECT_EQ(python_json_dumps(*python_literal_eval("{1: 'x', None: 2, False: 3}")),
            "{\"1\": \"x\", \"null\": 2, \"false\": 3}");
  EXPECT_FALSE(python_literal_eval("abc").has_value());
  EXPECT_FALSE(python_literal_eval("012").has_value());
  EXPECT_FALSE(python_literal_eval("[1,").has_value());
  EXPECT_THROW(python_literal_eval("{1, 2}"), ToolCallExtractionAborted);
  EXPECT_THROW(python_literal_eval("2j"), ToolCallExtractionAborted);
}

TEST(ToolParserValues, PythonIntAndFloatRules) {
  EXPECT_EQ(python_int(" +5 "), 5);
  EXPECT_FALSE(python_int("5_").has_value());
  EXPECT_FALSE(python_int("0x10").has_value());
  EXPECT_EQ(python_float(".5"), 0.5);
  EXPECT_EQ(python_float("5."), 5.0);
  EXPECT_EQ(python_float("-Infinity"), -HUGE_VAL);
  EXPECT_FALSE(python_float("1e").has_value());
  EXPECT_FALSE(python_float("0x1p3").has_value());
}

TEST(ToolParserValues, AbortedConversionLeavesEverythingAsContent) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "number"}}}}}])");
  const std::string out = "Hi<tool_call>\n<function=f>\n<parameter=x>\ninf\n</parameter>\n</function>\n</tool_call>";
  const auto got = extract_qwen3_coder_tool_calls(out, tools);
  EXPECT_FALSE(got.tools_called);
  EXPECT_TRUE(got.tool_calls.empty());
  EXPECT_EQ(got.content, out);
}

}  // namespace
}  // namespace fp4serve::server::openai
