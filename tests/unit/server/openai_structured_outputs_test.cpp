// Structured output on the request side: response_format / structured_outputs read, merged and
// checked as vLLM does (docs/vllm-surface.md §1.4), the forced tool_choice schemas, and the
// reasoning markers a constrained chat request carries.
#include <gtest/gtest.h>

#include "server/openai/chat_request.h"
#include "server/openai/completion_request.h"
#include "server/openai/forced_tool_calls.h"
#include "openai_test_support.h"    // NOLINT
#include "openai_test_tokenizer.h"  // NOLINT

namespace fp4serve::server::openai {
namespace {

using testing::expect_api_error;
using testing::test_limits;
using Kind = engine::StructuredOutputsParams::Kind;

engine::SamplingParams chat_params(const std::string& extra) {
  const std::string body = R"({"messages": [{"role": "user", "content": "hi"}])" + extra + "}";
  return to_sampling_params(parse_chat_request(body, test_limits()), 64, {}, test_limits());
}

engine::SamplingParams completion_params(const std::string& extra) {
  const std::string body = R"({"prompt": "hi")" + extra + "}";
  return to_sampling_params(parse_completion_request(body, test_limits()), 64, {}, test_limits());
}

ApiError chat_error(const std::string& extra) {
  return expect_api_error([&] { chat_params(extra); });
}

ApiError completion_error(const std::string& extra) {
  return expect_api_error([&] { completion_params(extra); });
}

const char* kSchema = R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]})";

TEST(StructuredOutputs, NoneByDefaultAndForTextFormat) {
  EXPECT_FALSE(chat_params("").structured_outputs);
  EXPECT_FALSE(chat_params(R"(, "response_format": {"type": "text"})").structured_outputs);
  EXPECT_FALSE(completion_params(R"(, "response_format": null, "structured_outputs": null)").structured_outputs);
}

TEST(StructuredOutputs, ResponseFormatJsonSchemaOnBothEndpoints) {
  const std::string rf = std::string(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true, "schema": )") +
                         kSchema + "}}";
  for (const auto& p : {chat_params(rf), completion_params(rf)}) {
    ASSERT_TRUE(p.structured_outputs);
    EXPECT_EQ(p.structured_outputs->kind, Kind::kJson);
    EXPECT_EQ(Json::parse(p.structured_outputs->spec), Json::parse(kSchema));
  }
  const auto p = chat_params(R"(, "response_format": {"type": "json_object"})");
  ASSERT_TRUE(p.structured_outputs);
  EXPECT_EQ(p.structured_outputs->kind, Kind::kJsonObject);
}

TEST(StructuredOutputs, EveryKindAndOption) {
  auto p = completion_params(R"(, "structured_outputs": {"regex": "[a-z]{3}"})");
  EXPECT_EQ(p.structured_outputs->kind, Kind::kRegex);
  EXPECT_EQ(p.structured_outputs->spec, "[a-z]{3}");
  p = completion_params(R"(, "structured_outputs": {"choice": ["yes", "no"]})");
  EXPECT_EQ(p.structured_outputs->kind, Kind::kChoice);
  EXPECT_EQ(p.structured_outputs->choice, (std::vector<std::string>{"yes", "no"}));
  p = chat_params(R"(, "structured_outputs": {"grammar": "root ::= \"a\" | \"b\""})");
  EXPECT_EQ(p.structured_outputs->kind, Kind::kGrammar);
  // json as a string is the schema's text; the whitespace options travel with it.
  p = chat_params(R"(, "structured_outputs": {"json": "{\"type\": \"array\"}", "disable_any_whitespace": true,
                     "disable_additional_properties": true, "whitespace_pattern": " ?"})");
  EXPECT_EQ(p.structured_outputs->kind, Kind::kJson);
  EXPECT_EQ(p.structured_outputs->spec, R"({"type": "array"})");
  EXPECT_TRUE(p.structured_outputs->disable_any_whitespace);
  EXPECT_TRUE(p.structured_outputs->disable_additional_properties);
  EXPECT_EQ(p.structured_outputs->whitespace_pattern, " ?");
  p = chat_params(R"(, "structured_outputs": {"json_object": true})");
  EXPECT_EQ(p.structured_outputs->kind, Kind::kJsonObject);
}

TEST(StructuredOutputs, ResponseFormatOverridesAFieldAsReplaceDoes) {
  // replace(structured_outputs, json=...) keeps the options.
  const auto p = chat_params(std::string(R"(, "structured_outputs": {"disable_any_whitespace": true, "json": )") + kSchema +
                             R"(}, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array"}}})");
  EXPECT_EQ(Json::parse(p.structured_outputs->spec), Json::parse(R"({"type": "array"})"));
  EXPECT_TRUE(p.structured_outputs->disable_any_whitespace);
}

TEST(StructuredOutputs, BadConstraintsAreRefusedWithTheReason) {
  for (const std::string extra : {R"(, "structured_outputs": {"regex": "a("})",
                                  R"(, "structured_outputs": {"grammar": "root ::= ("})",
                                  R"(, "structured_outputs": {"json": "{not json"})",
                                  R"(, "structured_outputs": {"choice": []})",
                                  R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "objectt"}}})"}) {
    const ApiError e = completion_error(extra);
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_EQ(e.type, "BadRequestError") << extra;
    EXPECT_FALSE(e.message.empty()) << extra;
  }
  EXPECT_NE(completion_error(R"(, "structured_outputs": {"regex": "a("})").message.find("regex"), std::string::npos);
}

TEST(StructuredOutputs, ConflictsGetVllmsMessages) {
  // check_structured_outputs_count (a "before" validator; completions name the field).
  ApiError e = completion_error(R"(, "structured_outputs": {"regex": "a", "choice": ["a"]})");
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_NE(e.message.find("You can only use one kind of constraints for structured outputs ('json', 'regex' or 'choice')."),
            std::string::npos);
  EXPECT_EQ(e.param, "structured_outputs");
  // StructuredOutputsParams.__post_init__ while pydantic validates the field.
  e = chat_error(R"(, "structured_outputs": {"regex": "a", "grammar": "root ::= \"a\""})");
  EXPECT_EQ(e.type, "Bad Request");
  // (The message is a repr inside pydantic's error dict, hence the escaped quotes.)
  EXPECT_NE(e.message.find("'loc': 'body.structured_outputs', 'msg': 'Value error, You can only use one kind of "
                           "structured outputs constraint but multiple are specified: {\\'json\\': None, "
                           "\\'regex\\': \\'a\\', \\'choice\\': None, \\'grammar\\': \\'root ::= \"a\"\\', "
                           "\\'json_object\\': None, \\'disable_any_whitespace\\': False, "
                           "\\'disable_additional_properties\\': False, \\'whitespace_pattern\\': None, "
                           "\\'structural_tag\\': None, \\'_backend\\': None, \\'_backend_was_auto\\': False}'"),
            std::string::npos)
      << e.message;
  e = chat_error(R"(, "structured_outputs": {})");
  EXPECT_NE(e.message.find("You must use one kind of structured outputs constraint but none are specified"),
            std::string::npos);
  // response_format on top of a constraint: dataclasses.replace re-runs the check (to_sampling_params).
  e = chat_error(R"(, "structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"})");
  EXPECT_EQ(e.type, "BadRequestError");
  EXPECT_EQ(e.message.rfind("You can only use one kind of structured outputs constraint but multiple are specified: "
                            "{'json': None, 'regex': 'a', 'choice': None, 'grammar': None, 'json_object': True,",
                            0),
            0u)
      << e.message;
  // json_schema without a schema leaves no constraint.
  e = chat_error(R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}})");
  EXPECT_EQ(e.message.rfind("You must use one kind of structured outputs constraint but none are specified", 0), 0u);
  // A named tool and a constraint.
  e = chat_error(R"(, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function",
                  "function": {"name": "f"}}, "structured_outputs": {"regex": "a"})");
  EXPECT_NE(e.message.find("You can only either use constraints for structured outputs or tools, not both."),
            std::string::npos);
}

TEST(StructuredOutputs, FieldTypesArePydantics) {
  ApiError e = chat_error(R"(, "structured_outputs": {"json": 3})");
  EXPECT_EQ(e.type, "Bad Request");
  EXPECT_EQ(e.param, "body.structured_outputs.json");
  e = chat_error(R"(, "structured_outputs": {"choice": "a"})");
  EXPECT_EQ(e.param, "body.structured_outputs.choice");
  e = chat_error(R"(, "structured_outputs": [1])");
  EXPECT_EQ(e.param, "body.structured_outputs");
  e = chat_error(R"(, "response_format": {"type": "xml"})");
  EXPECT_EQ(e.param, "body.response_format.type");
  e = chat_error(R"(, "response_format": {"type": "json_schema", "json_schema": {"schema": {}}})");
  EXPECT_EQ(e.param, "body.response_format.json_schema.name");
  e = chat_error(R"(, "response_format": {"type": "json_schema"})");  // vLLM's "before" validator
  EXPECT_NE(e.message.find("When response_format type is 'json_schema', the 'json_schema' field must be provided."),
            std::string::npos);
}

TEST(StructuredOutputs, StructuralTagIsRefusedClearly) {
  ApiError e = chat_error(R"(, "structured_outputs": {"structural_tag": "{}"})");
  EXPECT_EQ(e.param, "structured_outputs");
  EXPECT_NE(e.message.find("not supported by fp4serve"), std::string::npos);
  e = chat_error(R"(, "response_format": {"type": "structural_tag", "format": {}})");
  EXPECT_EQ(e.param, "response_format");
  EXPECT_NE(e.message.find("not supported by fp4serve"), std::string::npos);
}

TEST(StructuredOutputs, ForcedToolChoiceSchemas) {
  const Json tools = Json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}},
                                      "$defs": {"P": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "b", "parameters": null}}])");
  const Json required = *forced_tool_schema(ToolChoice::kRequired, "", tools);
  EXPECT_EQ(required, Json::parse(R"({"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": [
      {"properties": {"name": {"type": "string", "enum": ["a"]},
                      "parameters": {"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}},
       "required": ["name", "parameters"]},
      {"properties": {"name": {"type": "string", "enum": ["b"]}, "parameters": {"type": "object", "properties": {}}},
       "required": ["name", "parameters"]}]},
    "$defs": {"P": {"type": "integer"}}})"));
  // Named: the function's own schema ($defs in place); none without parameters; none for auto.
  EXPECT_EQ(*forced_tool_schema(ToolChoice::kNamed, "a", tools), tools[0]["function"]["parameters"]);
  EXPECT_FALSE(forced_tool_schema(ToolChoice::kNamed, "b", tools));
  EXPECT_FALSE(forced_tool_schema(ToolChoice::kAuto, "", tools));
  // Two tools defining one $defs name differently.
  Json clash = tools;
  clash[1]["function"]["parameters"] = Json::parse(R"({"type": "object", "$defs": {"P": {"type": "string"}}})");
  const ApiError e = expect_api_error([&] { forced_tool_schema(ToolChoice::kRequired, "", clash); });
  EXPECT_EQ(e.message, "Tool definition 'P' has multiple schemas, which is not supported.");
  // Through the request: the schema compiles, and "required" replaces a user constraint as
  // adjust_request does.
  const auto p = chat_params(R"(, "tools": )" + tools.dump() + R"(, "tool_choice": "required", "structured_outputs": {"grammar": "root ::= \"x\""})");
  ASSERT_TRUE(p.structured_outputs);
  EXPECT_EQ(p.structured_outputs->kind, Kind::kJson);
  EXPECT_EQ(Json::parse(p.structured_outputs->spec), required);
}

TEST(StructuredOutputs, ReasoningMarkersGateAConstrainedRequest) {
  engine::SamplingParams p = chat_params(R"(, "response_format": {"type": "json_object"})");
  resolve_reasoning_markers(p, testing::tiny_tokenizer(), /*gate_structured_outputs=*/true);
  EXPECT_EQ(p.reasoning_start_ids.size(), 7u);  // "<think>" as bytes
  EXPECT_EQ(p.reasoning_end_ids.size(), 8u);
  // Not gated (no reasoning parser, include_reasoning false, completions): constrained at once.
  p = chat_params(R"(, "response_format": {"type": "json_object"})");
  resolve_reasoning_markers(p, testing::tiny_tokenizer(), false);
  EXPECT_TRUE(p.reasoning_end_ids.empty());
  // Without a constraint the gate asks for nothing.
  p = chat_params("");
  resolve_reasoning_markers(p, testing::tiny_tokenizer(), true);
  EXPECT_TRUE(p.reasoning_end_ids.empty());
}

}  // namespace
}  // namespace fp4serve::server::openai
