// The error envelope and vLLM's three ways of wording a fault (openai_error.h).
#include <gtest/gtest.h>

#include "server/openai/openai_error.h"
#include "server/openai/python_repr.h"

namespace fp4serve::server::openai {
namespace {

TEST(OpenAIError, EnvelopeMatchesVllmOnTheWire) {
  // Observed on the wire (vLLM >= 0.10.1, docs/vllm-surface.md §1.10 and public client fixtures).
  const ApiError err = vllm_validation_error(
      "You passed 98305 input tokens and requested 32768 output tokens. However, the model's context "
      "length is only 131072 tokens, resulting in a maximum input length of 98304 tokens. Please "
      "reduce the length of the input prompt.",
      "input_tokens", "98305");
  EXPECT_EQ(err.body(),
            R"J({"error":{"message":"You passed 98305 input tokens and requested 32768 output tokens. However, the model's context length is only 131072 tokens, resulting in a maximum input length of 98304 tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=98305)","type":"BadRequestError","param":"input_tokens","code":400}})J");
}

TEST(OpenAIError, VllmErrorTextSuffix) {
  EXPECT_EQ(vllm_error_text("m.", std::nullopt, std::nullopt), "m.");
  EXPECT_EQ(vllm_error_text("m.", std::string("p"), std::nullopt), "m. (parameter=p)");
  EXPECT_EQ(vllm_error_text("m.", std::string("p"), std::string("3")), "m. (parameter=p, value=3)");
  EXPECT_EQ(vllm_error_text("m.", std::nullopt, std::string("3")), "m. (value=3)");
}

TEST(OpenAIError, ValueErrorHasNullParam) {
  const ApiError err = value_error("n must be at least 1, got 0.");
  EXPECT_EQ(err.body(), R"({"error":{"message":"n must be at least 1, got 0.","type":"BadRequestError","param":null,"code":400}})");
}

TEST(OpenAIError, ModelNotFound) {
  EXPECT_EQ(model_not_found("gpt-4").body(),
            R"({"error":{"message":"The model `gpt-4` does not exist.","type":"NotFoundError","param":"model","code":404}})");
}

TEST(OpenAIError, InternalAndNotImplemented) {
  EXPECT_EQ(internal_server_error().body(),
            R"({"error":{"message":"Internal server error","type":"InternalServerError","param":null,"code":500}})");
  EXPECT_EQ(not_implemented("x").status, 501);
  EXPECT_EQ(not_implemented("x").type, "NotImplementedError");
}

TEST(OpenAIError, CleanLocDropsPydanticMarkers) {
  EXPECT_EQ(clean_loc({"body", "function-wrap[__log_extra_fields__()]", "prompt"}), "body.prompt");
  EXPECT_EQ(clean_loc({"body", "stop", "list[str]", "1"}), "body.stop.1");
  EXPECT_EQ(clean_loc({"body", "stop", "str"}), "body.stop");
  EXPECT_EQ(clean_loc({"body"}), "body");
}

TEST(OpenAIError, PydanticTypeFaultMessage) {
  ValidationIssue issue{"float_parsing", {"body", "temperature"},
                        "Input should be a valid number, unable to parse string as a number", "hot",
                        std::nullopt, false, std::nullopt};
  const ApiError err = request_validation_error({issue});
  EXPECT_EQ(err.status, 400);
  EXPECT_EQ(err.type, "Bad Request");
  EXPECT_EQ(err.param, "body.temperature");
  EXPECT_EQ(err.message,
            "1 validation error:\n  {'type': 'float_parsing', 'loc': 'body.temperature', 'msg': 'Input should be a "
            "valid number, unable to parse string as a number', 'input': 'hot'}");
}

TEST(OpenAIError, SeveralFaultsArePluralAndInputsSummarised) {
  std::vector<ValidationIssue> issues;
  issues.push_back({"string_type", {"body", "stop", "str"}, "Input should be a valid string", 5, std::nullopt, false, std::nullopt});
  issues.push_back({"list_type", {"body", "stop", "list[str]"}, "Input should be a valid list", nlohmann::ordered_json::array({1, 2}),
                    std::nullopt, false, std::nullopt});
  const ApiError err = request_validation_error(issues);
  EXPECT_EQ(err.param, "body.stop");
  EXPECT_EQ(err.message,
            "2 validation errors:\n  {'type': 'string_type', 'loc': 'body.stop', 'msg': 'Input should be a valid "
            "string', 'input': '5'}\n  {'type': 'list_type', 'loc': 'body.stop', 'msg': 'Input should be a valid "
            "list', 'input': '<list of 2 items>'}");
}

TEST(OpenAIError, MoreThanTenFaultsAreCounted) {
  std::vector<ValidationIssue> issues;
  for (int i = 0; i < 12; ++i) {
    issues.push_back({"int_type", {"body", "x"}, "Input should be a valid integer", nullptr, std::nullopt, false, std::nullopt});
  }
  const std::string m = request_validation_error(issues).message;
  EXPECT_EQ(m.rfind("12 validation errors:\n", 0), 0u);
  EXPECT_NE(m.find("\n  ...and 2 more errors"), std::string::npos);
}

TEST(OpenAIError, LongStringInputIsTruncated) {
  ValidationIssue issue{"int_parsing", {"body", "n"}, "m", std::string(300, 'a'), std::nullopt, false, std::nullopt};
  const std::string m = request_validation_error({issue}).message;
  EXPECT_NE(m.find("'" + std::string(200, 'a') + "...[truncated]'"), std::string::npos);
}

TEST(OpenAIError, BeforeValidatorIssueCarriesVllmParameter) {
  nlohmann::ordered_json body = {{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}};
  const ApiError err = request_validation_error(
      {before_validator_issue("Stream options can only be defined when `stream=True`.", "stream_options",
                              std::nullopt, body)});
  EXPECT_EQ(err.param, "stream_options");
  EXPECT_EQ(err.message,
            "1 validation error:\n  {'type': 'value_error', 'loc': 'body', 'msg': 'Value error, Stream options can "
            "only be defined when `stream=True`. (parameter=stream_options)', 'input': '<dict of 2 items>', 'ctx': "
            "{'error': VLLMValidationError('Stream options can only be defined when `stream=True`.')}}");
}

TEST(OpenAIError, BeforeValidatorWithoutParameterFallsBackToLoc) {
  const ApiError err = request_validation_error({before_validator_issue("x", std::nullopt, std::nullopt, {})});
  EXPECT_EQ(err.param, "body");
}

TEST(PythonRepr, Strings) {
  EXPECT_EQ(py_str_repr("abc"), "'abc'");
  EXPECT_EQ(py_str_repr("it's"), "\"it's\"");
  EXPECT_EQ(py_str_repr("a'b\"c"), "'a\\'b\"c'");
  EXPECT_EQ(py_str_repr("a\nb\\"), "'a\\nb\\\\'");
  EXPECT_EQ(py_str_repr(std::string("\x01", 1)), "'\\x01'");
  EXPECT_EQ(py_str_repr("héllo"), "'héllo'");
}

TEST(PythonRepr, Values) {
  using J = nlohmann::ordered_json;
  EXPECT_EQ(py_str(J(true)), "True");
  EXPECT_EQ(py_str(J(nullptr)), "None");
  EXPECT_EQ(py_str(J(1.0)), "1.0");
  EXPECT_EQ(py_str(J(-3)), "-3");
  EXPECT_EQ(py_str(J("s")), "s");
  EXPECT_EQ(py_repr(J("s")), "'s'");
  EXPECT_EQ(py_str(J::parse(R"({"a": [1, "x", null]})")), "{'a': [1, 'x', None]}");
  EXPECT_EQ(py_len("héllo"), 5u);
  EXPECT_EQ(py_int_list({1, 2}), "[1, 2]");
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

// Expected values printed by CPython's json.loads for the same texts.
TEST(PythonJson, DecodeErrorsAsCPythonWordsThem) {
  struct Case {
    const char* text;
    const char* expected;
  } cases[] = {
      {"{\"prompt\": ", "Expecting value: line 1 column 12 (char 11)"},
      {"{\"a\": 1,}", "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)"},
      {"{\"a\" 1}", "Expecting ':' delimiter: line 1 column 6 (char 5)"},
      {"{'a': 1}", "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"},
      {"{\"a\": 1} x", "Extra data: line 1 column 10 (char 9)"},
      {"[1, 2", "Expecting ',' delimiter: line 1 column 6 (char 5)"},
      {"{\"a\": \"b", "Unterminated string starting at: line 1 column 7 (char 6)"},
      {"abc", "Expecting value: line 1 column 1 (char 0)"},
      {"{\n\"a\": }", "Expecting value: line 2 column 6 (char 7)"},
  };
  for (const auto& c : cases) {
    const auto err = python_json_decode_error(c.text);
    ASSERT_TRUE(err) << c.text;
    EXPECT_EQ(err->str(), c.expected) << c.text;
  }
  EXPECT_FALSE(python_json_decode_error("{\"a\": [1, 2]}"));
}

}  // namespace
}  // namespace fp4serve::server::openai

namespace fp4serve::server::openai {
namespace {

TEST(OpenAIError, MessagesAreSanitizedAsVllmDoes) {
  EXPECT_EQ(sanitize_message("  open /home/user/secret.txt failed "), "open <path> failed");
  EXPECT_EQ(sanitize_message("obj <Foo at 0x7f00ab>"), "obj <Foo>");
  EXPECT_EQ(sanitize_message("see data/dir/file.json"), "see data<path>");
  EXPECT_EQ(sanitize_message("The model `Qwen/Qwen3.6-35B-A3B` does not exist."),
            "The model `Qwen/Qwen3.6-35B-A3B` does not exist.");
  EXPECT_EQ(value_error("bad /tmp/x").message, "bad <path>");
}

}  // namespace
}  // namespace fp4serve::server::openai
