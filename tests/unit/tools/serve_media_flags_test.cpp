// --limit-mm-per-prompt (vLLM's JSON forms), --vision-device, --allowed-local-media-path: parsed
// into MediaSettings (what the chat route and the engine side read), bad values refused by name.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

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

// Without a preprocessor_config.json the tower's own patch sizes win over Qwen3.6's patch 16:
// tiny-bf16's tower has patch 8. With one, the file decides (even against the tower).
TEST(ServeMediaFlags, ImageProcessorFallsBackToTheVisionConfig) {
  const std::filesystem::path tiny = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/tiny-bf16";
  ASSERT_FALSE(std::filesystem::exists(tiny / "preprocessor_config.json"));
  std::vector<std::string> log;
  const auto fallback = image_processor_config_for(tiny, log);
  EXPECT_EQ(fallback.patch_size, 8);
  EXPECT_EQ(fallback.temporal_patch_size, 2);
  EXPECT_EQ(fallback.merge_size, 2);
  EXPECT_EQ(fallback.min_pixels, vision::ImageProcessorConfig{}.min_pixels);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("vision_config patch_size 8"), std::string::npos) << log[0];

  const auto dir = std::filesystem::temp_directory_path() / ("fp4serve_preproc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(tiny / "config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "preprocessor_config.json")
      << R"({"patch_size": 14, "merge_size": 2, "size": {"shortest_edge": 1024, "longest_edge": 65536}})";
  log.clear();
  const auto file = image_processor_config_for(dir, log);
  EXPECT_EQ(file.patch_size, 14);
  EXPECT_EQ(file.min_pixels, 1024);
  EXPECT_EQ(file.max_pixels, 65536);
  EXPECT_TRUE(log.empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fp4serve::tools
