// --limit-mm-per-prompt (vLLM's JSON forms), --vision-device, --allowed-local-media-path: parsed
// into MediaSettings (what the chat route and the engine side read), bad values refused by name.
#include <filesystem>

#include <gtest/gtest.h>

#include "tools/serve_media_flags.h"

namespace fp4serve::tools {
namespace {

MediaSettings parse(const std::string& limit, const std::string& device = "same", const std::string& path = "") {
  MediaFlags f;
  f.limit_mm_per_prompt = limit;
  f.vision_device = device;
  f.allowed_local_media_path = path;
  return resolve_media_flags(f);
}

TEST(ServeMediaFlags, LimitMmPerPrompt) {
  EXPECT_EQ(parse("").image_limit, 999);
  EXPECT_FALSE(parse("").image_limit_set);
  EXPECT_EQ(parse(R"({"image": 4})").image_limit, 4);
  EXPECT_EQ(parse(R"({"image": {"count": 2, "width": 512, "height": 512}, "video": 0})").image_limit, 2);
  const MediaSettings off = parse(R"({"image": 0})");
  EXPECT_EQ(off.image_limit, 0);
  EXPECT_FALSE(off.vision_tower_needed());
  EXPECT_TRUE(parse("").vision_tower_needed());
  EXPECT_THROW(parse("image=2"), std::invalid_argument);
  EXPECT_THROW(parse(R"({"image": -1})"), std::invalid_argument);
  EXPECT_THROW(parse(R"({"image": "2"})"), std::invalid_argument);
  EXPECT_THROW(parse(R"({"hologram": 1})"), std::invalid_argument);
}

TEST(ServeMediaFlags, VisionDeviceAndLocalMediaPath) {
  EXPECT_EQ(parse("").vision_device, VisionDevice::kSame);
  EXPECT_EQ(parse("", "cpu").vision_device, VisionDevice::kCpu);
  EXPECT_EQ(parse("", "same", std::string(FP4SERVE_TEST_DATA_DIR) + "/vision/../vision").allowed_local_media_path,
            std::filesystem::canonical(std::string(FP4SERVE_TEST_DATA_DIR) + "/vision").string());
  try {
    parse("", "same", "/no/such/dir");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "Invalid `--allowed-local-media-path`: The path /no/such/dir does not exist.");
  }
}

}  // namespace
}  // namespace fp4serve::tools
