// encode_png / png_data_url (what `fp4serve canary` sends): the server's own decoder reads back the
// same pixels, and the base64 is the inverse of decode_base64.
#include <gtest/gtest.h>

#include "vision/image_decode.h"
#include "vision/media_source.h"
#include "vision/png_encode.h"

namespace fp4serve::vision {
namespace {

TEST(PngEncode, RoundTripsThroughTheDecoder) {
  RgbImage image = solid_image(5, 3, 255, 255, 0);
  image.rgb[7] = 12;  // one non-solid byte: rows and channels must land where they were
  const auto png = encode_png(image);
  ASSERT_EQ(sniff_image_format(png), ImageFormat::kPng);
  const RgbImage back = decode_image(png);
  EXPECT_EQ(back.width, 5);
  EXPECT_EQ(back.height, 3);
  EXPECT_EQ(back.rgb, image.rgb);
  EXPECT_THROW(encode_png(RgbImage{2, 2, {1, 2, 3}}), std::runtime_error);
}

TEST(PngEncode, Base64AndDataUrl) {
  EXPECT_EQ(encode_base64({}), "");
  EXPECT_EQ(encode_base64({'f'}), "Zg==");
  EXPECT_EQ(encode_base64({'f', 'o'}), "Zm8=");
  EXPECT_EQ(encode_base64({'f', 'o', 'o'}), "Zm9v");
  const std::vector<std::uint8_t> bytes{0, 255, 128, 7, 64};
  EXPECT_EQ(decode_base64(encode_base64(bytes)), bytes);
  const std::string url = png_data_url(solid_image(32, 32, 0, 0, 255));
  ASSERT_EQ(url.rfind("data:image/png;base64,", 0), 0u);
  const RgbImage back = decode_image(decode_base64(url.substr(22)));
  EXPECT_EQ(back.rgb, solid_image(32, 32, 0, 0, 255).rgb);
}

}  // namespace
}  // namespace fp4serve::vision
