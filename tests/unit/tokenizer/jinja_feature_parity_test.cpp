// One Jinja feature per case (whitespace control, scoping, filters, tests, Python methods, error
// kinds), each rendered by jinja2 in transformers' environment: tests/data/chat_templates/
// jinja_feature_cases.jsonl from tools/reference/make_chat_template_cases.py.
#include <gtest/gtest.h>

#include "tokenizer/chat_template/jinja_template.h"
#include "unit/tokenizer/chat_template_test_util.h"

namespace fp4serve::jinja {
namespace {

using nlohmann::ordered_json;

const std::vector<ordered_json>& feature_cases() {
  static const auto cases = test::read_jsonl(test::chat_template_data_dir() + "/jinja_feature_cases.jsonl");
  return cases;
}

class JinjaFeatureParity : public ::testing::TestWithParam<std::size_t> {};

TEST_P(JinjaFeatureParity, MatchesJinja2) {
  const ordered_json& c = feature_cases().at(GetParam());
  const std::string source = c["template_source"].get<std::string>();
  SCOPED_TRACE("template: " + source);
  if (c.contains("expected")) {
    const std::string expected = c["expected"].get<std::string>();
    const std::string actual = Template(source).render(c["context"]);
    EXPECT_EQ(actual, expected) << test::first_difference(expected, actual);
    return;
  }
  const ordered_json& err = c["error"];
  const bool syntax = err["syntax"].get<bool>();
  const bool raised = err["raised"].get<bool>();
  try {
    Template tpl(source);
    const std::string out = tpl.render(c["context"]);
    ADD_FAILURE() << "rendered " << out << " but jinja2 raised " << err["type"] << ": " << err["message"];
  } catch (const TemplateSyntaxError& e) {
    EXPECT_TRUE(syntax) << "syntax error " << e.what() << " where jinja2 raised " << err["type"];
  } catch (const TemplateRaisedError& e) {
    EXPECT_TRUE(raised) << e.what();
    EXPECT_EQ(e.message(), err["message"].get<std::string>());
  } catch (const TemplateError& e) {
    EXPECT_FALSE(syntax || raised) << e.what() << " where jinja2 raised " << err["type"] << ": " << err["message"];
  }
}

std::vector<std::size_t> case_indices() {
  std::vector<std::size_t> v(feature_cases().size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, JinjaFeatureParity, ::testing::ValuesIn(case_indices()),
                         [](const ::testing::TestParamInfo<std::size_t>& info) {
                           return feature_cases().at(info.param)["id"].get<std::string>();
                         });

TEST(JinjaFeatureParityFile, HasCasesOfEveryKind) {
  int rendered = 0, syntax = 0, raised = 0, runtime = 0;
  for (const auto& c : feature_cases()) {
    if (c.contains("expected")) ++rendered;
    else if (c["error"]["syntax"].get<bool>()) ++syntax;
    else if (c["error"]["raised"].get<bool>()) ++raised;
    else ++runtime;
  }
  EXPECT_GE(rendered, 80);
  EXPECT_GE(syntax, 5);
  EXPECT_GE(raised, 2);
  EXPECT_GE(runtime, 10);
}

}  // namespace
}  // namespace fp4serve::jinja
