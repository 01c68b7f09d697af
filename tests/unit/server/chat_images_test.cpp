// The chat route's image steps: vLLM's per-prompt limit messages, each <|image_pad|> expanded to
// its image's grid.num_llm_tokens(merge) copies, runs located after truncation with their hashes,
// and bad images refused with a 400 that says why.
#include <gtest/gtest.h>

#include "server/openai/openai_error.h"
#include "server/routes/chat_images.h"
#include "vision/content_hash.h"

namespace fp4serve::server {
namespace {

constexpr std::int32_t kPad = 77;

ImageServing serving(int limit = 2) {
  ImageServing s;
  s.processor = vision::ImageProcessorConfig{};
  s.image_limit = limit;
  s.image_pad_id = kPad;
  return s;
}

std::shared_ptr<const vision::PixelPatches> patches(int h, int w, float fill) {
  auto p = std::make_shared<vision::PixelPatches>();
  p->grid = {1, h, w};
  p->patch_dim = 4;
  p->values.assign(static_cast<std::size_t>(h * w * 4), fill);
  return p;
}

openai::ApiError error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const openai::ApiException& e) {
    return e.error();
  }
  return {};
}

TEST(ChatImages, LimitsGetVllmsMessages) {
  const std::vector<openai::ChatImagePart> three(3, openai::ChatImagePart{"data:image/png;base64,AAAA", ""});
  auto e = error_of([&] { prepare_chat_images(three, serving(2)); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.message, "At most 2 image(s) may be provided in one prompt. Set `--limit-mm-per-prompt` to increase this limit.");
  EXPECT_EQ(e.param, "image");
  ImageServing text_only;
  e = error_of([&] { prepare_chat_images({three[0]}, text_only); });
  EXPECT_EQ(e.message, "At most 0 image(s) may be provided in one prompt.");
}

TEST(ChatImages, BadImagesSayWhy) {
  auto e = error_of([&] { prepare_chat_images({{"data:image/png;base64,aGVsbG8=", ""}}, serving()); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "image_url");
  EXPECT_NE(e.message.find("cannot identify image file"), std::string::npos);
}

TEST(ChatImages, PadsExpandToEachImagesRunAndAreLocated) {
  const ImageServing s = serving();
  const PreparedImages images = {patches(4, 6, 1.0f), patches(2, 2, 2.0f)};  // 6 and 1 tokens
  std::vector<std::int32_t> ids = {1, 2, kPad, 3, 4, kPad, 5};
  expand_image_pads(ids, images, s);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{1, 2, kPad, kPad, kPad, kPad, kPad, kPad, 3, 4, kPad, 5}));
  const auto runs = locate_image_runs(ids, images, s);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].offset, 2);
  EXPECT_EQ(runs[0].num_tokens, 6);
  EXPECT_EQ(runs[1].offset, 10);
  EXPECT_EQ(runs[1].num_tokens, 1);
  EXPECT_EQ(runs[0].content_hash, vision::content_hash(*images[0]));
  EXPECT_NE(runs[0].content_hash, runs[1].content_hash);
  EXPECT_EQ(runs[1].pixels, images[1]);
}

TEST(ChatImages, MismatchesAndCutImagesAreRefused) {
  const ImageServing s = serving();
  const PreparedImages images = {patches(4, 6, 1.0f)};
  std::vector<std::int32_t> ids = {1, kPad, kPad, 2};
  EXPECT_NE(error_of([&] { expand_image_pads(ids, images, s); }).message.find("2 <|image_pad|> token(s) for 1 image(s)"),
            std::string::npos);
  const std::vector<std::int32_t> cut = {kPad, kPad, 3};  // 6 expected: truncation took the rest
  EXPECT_EQ(error_of([&] { locate_image_runs(cut, images, s); }).param, "truncate_prompt_tokens");
}

}  // namespace
}  // namespace fp4serve::server
