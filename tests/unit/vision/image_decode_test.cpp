// Decoding against PIL (tests/data/vision, tools/reference/make_image_goldens.py): every format
// and mode decodes to PIL's RGB exactly (vLLM's loading: RGBA over white, other alpha dropped),
// and bad bytes get an ImageError that says why.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include "unit/vision/npy.h"
#include "vision/image_decode.h"
#include "vision/image_error.h"

namespace fp4serve::vision {
namespace {

using testing::read_bytes;
using testing::read_npy;

using testing::kDir;
using testing::manifest;

std::string error_of(const std::vector<std::uint8_t>& bytes, const DecodeLimits& limits = {},
                     std::string_view mime = {}) {
  try {
    decode_image(bytes, limits, mime);
  } catch (const ImageError& e) {
    return e.what();
  }
  return "";
}

// Sets a PNG's IHDR width and height and recomputes the chunk's CRC (libpng checks it first).
void set_png_size(std::vector<std::uint8_t>& png, std::uint32_t width, std::uint32_t height) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<std::uint8_t>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<std::uint8_t>(height >> (24 - 8 * i));
  }
  const uLong crc = crc32(0, png.data() + 12, 17);
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
}

// JPEG: Pillow 11.3's wheel bundles libjpeg-turbo 3.1.1, Debian has 2.1.5; both use the islow IDCT
// and fancy upsampling by default, and every golden (baseline 4:2:0, 4:2:2, 4:4:4, grey,
// progressive, quality 30..95) decodes bit for bit the same. WebP likewise (libwebp 1.5.0 vs 1.2.4).
TEST(ImageDecode, EveryGoldenDecodesToPilsRgbExactly) {
  const auto m = manifest();
  ASSERT_GE(m["images"].size(), 10u);
  ASSERT_GE(m["decode_only"].size(), 4u);
  auto all = m["images"];
  for (const auto& img : m["decode_only"]) all.push_back(img);
  for (const auto& img : all) {
    SCOPED_TRACE(img["name"].get<std::string>());
    const RgbImage rgb = decode_image(read_bytes(kDir + img["file"].get<std::string>()));
    const auto golden = read_npy(kDir + img["name"].get<std::string>() + ".rgb.npy");
    ASSERT_EQ(golden.shape.size(), 3u);
    ASSERT_EQ(rgb.height, golden.shape[0]);
    ASSERT_EQ(rgb.width, golden.shape[1]);
    const auto want = golden.as<std::uint8_t>();
    std::size_t diff = 0;
    int max_diff = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const int d = std::abs(int(want[i]) - int(rgb.rgb[i]));
      diff += d != 0;
      max_diff = std::max(max_diff, d);
    }
    EXPECT_EQ(diff, 0u) << "max abs diff " << max_diff;
  }
}

TEST(ImageDecode, SniffsFormatsByContent) {
  EXPECT_EQ(sniff_image_format(read_bytes(kDir + "photo_61x47.jpg")), ImageFormat::kJpeg);
  EXPECT_EQ(sniff_image_format(read_bytes(kDir + "rgb_37x53.png")), ImageFormat::kPng);
  EXPECT_EQ(sniff_image_format(read_bytes(kDir + "lossy_39x28.webp")), ImageFormat::kWebp);
  EXPECT_EQ(sniff_image_format(read_bytes(kDir + "anim_25x34.gif")), ImageFormat::kGif);
}

TEST(ImageDecode, EmptyAndUnknownBytesAreRefused) {
  EXPECT_NE(error_of({}).find("empty"), std::string::npos);
  EXPECT_NE(error_of({'h', 'e', 'l', 'l', 'o'}).find("cannot identify image file"), std::string::npos);
}

TEST(ImageDecode, AMimeTypeNamingAnotherFormatIsRefused) {
  const auto png = read_bytes(kDir + "rgb_37x53.png");
  EXPECT_NE(error_of(png, {}, "image/jpeg").find("says image/jpeg but the bytes are a PNG image"), std::string::npos);
  EXPECT_EQ(error_of(png, {}, "image/png"), "");
  EXPECT_EQ(error_of(png, {}, "application/octet-stream"), "");
}

TEST(ImageDecode, TruncatedFilesOfEveryFormatAreRefused) {
  for (const char* file : {"photo_61x47.jpg", "rgb_37x53.png", "lossy_39x28.webp", "anim_25x34.gif", "large_150x200.png"}) {
    SCOPED_TRACE(file);
    auto bytes = read_bytes(kDir + file);
    // A GIF cut after its first frame still opens (only that frame is read), so cut early in it.
    const bool gif = std::string(file).ends_with(".gif");
    for (std::size_t keep : {bytes.size() / 4, gif ? bytes.size() / 3 : bytes.size() * 9 / 10, std::size_t{16}}) {
      std::vector<std::uint8_t> cut(bytes.begin(), bytes.begin() + keep);
      const std::string e = error_of(cut);
      EXPECT_FALSE(e.empty()) << "kept " << keep;
    }
  }
}

TEST(ImageDecode, CorruptDataIsAnErrorNotACrash) {
  for (const char* file : {"photo_61x47.jpg", "rgb_37x53.png", "lossy_39x28.webp", "anim_25x34.gif"}) {
    auto bytes = read_bytes(kDir + file);
    std::uint32_t state = 12345;
    for (int trial = 0; trial < 50; ++trial) {
      auto c = bytes;
      for (int k = 0; k < 8; ++k) {
        state = state * 1664525u + 1013904223u;
        const std::size_t at = 16 + state % (c.size() - 16);
        c[at] = static_cast<std::uint8_t>(state >> 24);
      }
      try {
        const RgbImage img = decode_image(c);
        EXPECT_EQ(img.rgb.size(), static_cast<std::size_t>(img.width) * img.height * 3);
      } catch (const ImageError&) {
      }
    }
  }
}

TEST(ImageDecode, HeaderDimensionsAreCheckedBeforeDecoding) {
  // A PNG whose header claims 100000 x 100000 (a decompression bomb): refused from the header,
  // with PIL's message, without allocating 30 GB.
  auto png = read_bytes(kDir + "rgb_37x53.png");
  DecodeLimits limits;
  limits.max_dimension = 1 << 20;
  auto bomb = png;
  set_png_size(bomb, 100000, 100000);
  const std::string e = error_of(bomb, limits);
  EXPECT_NE(e.find("exceeds limit of 178956970 pixels, could be decompression bomb DOS attack"), std::string::npos) << e;

  DecodeLimits small;
  small.max_dimension = 40;
  EXPECT_NE(error_of(png, small).find("a side may be at most 40"), std::string::npos);
  small = {};
  small.max_pixels = 100;
  EXPECT_NE(error_of(read_bytes(kDir + "photo_61x47.jpg"), small).find("decompression bomb"), std::string::npos);
  EXPECT_NE(error_of(read_bytes(kDir + "lossy_39x28.webp"), small).find("decompression bomb"), std::string::npos);
  EXPECT_NE(error_of(read_bytes(kDir + "anim_25x34.gif"), small).find("decompression bomb"), std::string::npos);
  small = {};
  small.max_encoded_bytes = 100;
  EXPECT_NE(error_of(png, small).find("at most 100 are accepted"), std::string::npos);
}

TEST(ImageDecode, ZeroSizeImagesAreRefused) {
  auto png = read_bytes(kDir + "rgb_37x53.png");
  set_png_size(png, 0, 37);
  EXPECT_FALSE(error_of(png).empty());
  auto gif = read_bytes(kDir + "anim_25x34.gif");
  gif[6] = gif[7] = 0;  // logical screen width 0
  EXPECT_NE(error_of(gif).find("zero size"), std::string::npos);
}

}  // namespace
}  // namespace fp4serve::vision
