// The canary's answer rules: what passes, and each kind of garbage the seeds reported.
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "tools/canary_checks.h"
#include "vision/png_encode.h"

namespace fp4serve::tools {
namespace {

CanaryCheck check(const std::string& name) {
  for (const auto& c : canary_checks())
    if (c.name == name) return c;
  ADD_FAILURE() << "no check " << name;
  return {};
}

TEST(CanaryChecks, HealthyAnswersPass) {
  EXPECT_EQ(check_problem(check("capital-of-france"), "The capital of France is Paris."), "");
  EXPECT_EQ(check_problem(check("17x23"), "17 x 23 = 391"), "");
  EXPECT_EQ(check_problem(check("special-tokens"), "Hello there!"), "");
}

TEST(CanaryChecks, ImageChecksSendSolidColourPngs) {
  const CanaryCheck red = check("image-colour-red");
  const CanaryCheck blue = check("image-colour-blue");
  EXPECT_EQ(red.prompt, "What colour is this image?");
  EXPECT_EQ(red.image_url, vision::png_data_url(vision::solid_image(32, 32, 255, 0, 0)));
  EXPECT_EQ(blue.image_url, vision::png_data_url(vision::solid_image(32, 32, 0, 0, 255)));
  EXPECT_EQ(check_problem(red, "The image is red."), "");
  EXPECT_EQ(check_problem(blue, "The image is red."), "answer does not contain \"blue\"");
  EXPECT_TRUE(check("capital-of-france").image_url.empty());
}

TEST(CanaryChecks, WrongAnswersFailWithTheReason) {
  EXPECT_EQ(check_problem(check("capital-of-france"), "The capital of France is Lyon."),
            "answer does not contain \"Paris\"");
  EXPECT_EQ(check_problem(check("17x23"), "17 x 23 = 381"), "answer does not contain \"391\"");
}

TEST(CanaryChecks, GarbageIsCaughtEvenWhenTheExpectedWordIsThere) {
  EXPECT_EQ(sanity_problem("  \n"), "empty answer");
  EXPECT_EQ(sanity_problem("Paris \xEF\xBF\xBD"), "replacement character U+FFFD in the answer");
  EXPECT_NE(check_problem(check("capital-of-france"), "Paris<|box_end|><|box_end|><|box_end|>").find("run of special"),
            std::string::npos);
  EXPECT_EQ(sanity_problem("one <|im_end|> token alone is not a run"), "");
}

}  // namespace
}  // namespace fp4serve::tools

namespace fp4serve::tools {
namespace {

TEST(CanaryCli, UnreachableServerIsExit1WithTheReason) {
  const auto r = fp4serve::testing::run_fp4serve("canary http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot connect to http://127.0.0.1:1"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace fp4serve::tools
