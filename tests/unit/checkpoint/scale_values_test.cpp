// A checkpoint whose scales are NaN or infinite is refused at load, naming the tensor: such a scale
// decodes every value it covers to NaN and the server would answer garbage without an error.
// The real ModelOpt NVFP4 tiny model (tests/data/models/tiny-nvfp4) is copied and one scale poisoned.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>
#include <limits>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/weight_loader.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;

const std::filesystem::path kTinyNvfp4 = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-nvfp4";

// Copies tiny-nvfp4 into `dir` and overwrites `value` at element `index` of tensor `name`.
void copy_with_poisoned_scale(const std::filesystem::path& dir, const std::string& name, int64_t index,
                              const std::string& value) {
  for (const auto& f : std::filesystem::directory_iterator(kTinyNvfp4))
    std::filesystem::copy_file(f.path(), dir / f.path().filename());
  std::fstream file(dir / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  uint64_t header_len = 0;
  file.read(reinterpret_cast<char*>(&header_len), 8);
  std::string header(header_len, '\0');
  file.read(header.data(), static_cast<std::streamsize>(header_len));
  const auto entry = nlohmann::json::parse(header).at(name);
  const uint64_t begin = 8 + header_len + entry.at("data_offsets").at(0).get<uint64_t>();
  file.seekp(static_cast<std::streamoff>(begin + index * value.size()));
  file.write(value.data(), static_cast<std::streamsize>(value.size()));
}

std::string load_error(const std::filesystem::path& dir) {
  try {
    LoadedCheckpoint::open(dir.string());
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(ScaleValues, TheUnpoisonedCopyLoads) {
  testing::TempDir dir;
  copy_with_poisoned_scale(dir.path(), "model.language_model.layers.0.mlp.experts.0.down_proj.weight_scale", 0,
                           std::string(1, '\x38'));  // 1.0: a valid code
  EXPECT_EQ(load_error(dir.path()), "");
}

TEST(ScaleValues, NanE4m3BlockScaleIsRefusedByName) {
  testing::TempDir dir;
  const std::string t = "model.language_model.layers.0.mlp.experts.3.down_proj.weight_scale";
  copy_with_poisoned_scale(dir.path(), t, 5, std::string(1, '\xFF'));
  const std::string msg = load_error(dir.path());
  EXPECT_THAT(msg, HasSubstr("non-finite scale: " + t + " has 1 NaN/Inf value (first at element 5)"));
}

TEST(ScaleValues, InfiniteF32GlobalScaleIsRefusedByName) {
  testing::TempDir dir;
  const std::string t = "model.language_model.layers.1.mlp.shared_expert.up_proj.weight_scale_2";
  const float inf = std::numeric_limits<float>::infinity();
  std::string bytes(4, '\0');
  std::memcpy(bytes.data(), &inf, 4);
  copy_with_poisoned_scale(dir.path(), t, 0, bytes);
  EXPECT_THAT(load_error(dir.path()), HasSubstr("non-finite scale: " + t));
}

}  // namespace
}  // namespace fp4serve
