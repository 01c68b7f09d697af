// ShardedCheckpoint over the three directory layouts, and its refusals naming the index or shard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/sharded_checkpoint.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

std::vector<std::byte> filled(size_t n, uint8_t v) { return std::vector<std::byte>(n, std::byte{v}); }

// Five 1000-byte tensors; with a 2500-byte limit huggingface_hub's rule gives shards {a,b} {c,d} {e}.
SafetensorsWriter five_tensors() {
  SafetensorsWriter w;
  const char* names[] = {"a", "b", "c", "d", "e"};
  for (int i = 0; i < 5; ++i) w.add(names[i], DType::kBF16, {20, 25}, filled(1000, static_cast<uint8_t>(i + 1)));
  return w;
}

std::string error_of(const std::filesystem::path& dir) {
  try {
    ShardedCheckpoint::open(dir);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "opened " << dir;
  return "";
}

TEST(ShardedCheckpoint, IndexedRoundTrip) {
  TempDir dir;
  const auto written = five_tensors().write_sharded(dir.path(), 2500);
  std::vector<std::string> names;
  for (const auto& p : written) names.push_back(p.filename().string());
  EXPECT_THAT(names, ElementsAre("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                                 "model-00003-of-00003.safetensors", "model.safetensors.index.json"));

  const auto index = nlohmann::json::parse(testing::read_file(dir / "model.safetensors.index.json"));
  EXPECT_EQ(index["metadata"]["total_size"], 5000);
  EXPECT_EQ(index["weight_map"]["c"], "model-00002-of-00003.safetensors");

  auto ck = ShardedCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), ShardedCheckpoint::Layout::kIndexed);
  EXPECT_EQ(ck.files().size(), 3u);
  EXPECT_THAT(ck.tensor_names(), ElementsAre("a", "b", "c", "d", "e"));
  EXPECT_EQ(ck.index_total_size(), 5000u);
  EXPECT_TRUE(ck.unindexed_tensors().empty());
  auto e = ck.at("e");
  EXPECT_EQ(e.file->path().filename(), "model-00003-of-00003.safetensors");
  EXPECT_THAT(e.info->shape, ElementsAre(20, 25));
  EXPECT_EQ(ck.bytes("d")[999], std::byte{4});
  EXPECT_FALSE(ck.contains("f"));
}

TEST(ShardedCheckpoint, OversizedTensorGetsItsOwnShard) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("small1", DType::kU8, {10}, filled(10, 1));
  w.add("huge", DType::kU8, {100}, filled(100, 2));
  w.add("small2", DType::kU8, {10}, filled(10, 3));
  w.write_sharded(dir.path(), 50);
  auto ck = ShardedCheckpoint::open(dir.path());
  // huggingface_hub appends the oversized tensor's shard immediately: huge, then {small1, small2}.
  EXPECT_EQ(ck.at("huge").file->path().filename(), "model-00001-of-00002.safetensors");
  EXPECT_EQ(ck.at("small1").file->path().filename(), "model-00002-of-00002.safetensors");
  EXPECT_EQ(ck.at("small2").file, ck.at("small1").file);
}

TEST(ShardedCheckpoint, SingleFileWhenEverythingFits) {
  TempDir dir;
  const auto written = five_tensors().write_sharded(dir.path());
  ASSERT_EQ(written.size(), 1u);
  EXPECT_EQ(written[0].filename(), "model.safetensors");
  EXPECT_FALSE(std::filesystem::exists(dir / "model.safetensors.index.json"));
  auto ck = ShardedCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), ShardedCheckpoint::Layout::kSingleFile);
  EXPECT_EQ(ck.tensor_count(), 5u);
  EXPECT_EQ(ck.bytes("a")[0], std::byte{1});
}

TEST(ShardedCheckpoint, SymlinkedFilesAsInTheHfCache) {
  // A Hugging Face cache snapshot holds symlinks to ../../blobs/<hash>.
  TempDir dir;
  five_tensors().write_sharded(dir / "written", 2500);
  const auto snapshot = dir / "snapshots" / "abc";
  std::filesystem::create_directories(snapshot);
  std::filesystem::create_directories(dir / "blobs");
  int i = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "written")) {
    const auto blob = dir / "blobs" / ("blob" + std::to_string(i++));
    std::filesystem::rename(e.path(), blob);
    std::filesystem::create_symlink(std::filesystem::path("../../blobs") / blob.filename(),
                                    snapshot / e.path().filename());
  }
  auto ck = ShardedCheckpoint::open(snapshot);
  EXPECT_EQ(ck.layout(), ShardedCheckpoint::Layout::kIndexed);
  EXPECT_EQ(ck.tensor_count(), 5u);
  EXPECT_EQ(ck.bytes("c")[0], std::byte{3});
}

TEST(ShardedCheckpoint, UnindexedShardsAreUnited) {
  TempDir dir;
  SafetensorsWriter w1, w2;
  w1.add("x", DType::kU8, {2}, filled(2, 7));
  w2.add("y", DType::kU8, {3}, filled(3, 8));
  w1.write(dir / "part-a.safetensors");
  w2.write(dir / "part-b.safetensors");
  testing::write_file(dir / "README.md", "not a weight file");
  auto ck = ShardedCheckpoint::open(dir.path());
  EXPECT_EQ(ck.layout(), ShardedCheckpoint::Layout::kUnindexedShards);
  EXPECT_THAT(ck.tensor_names(), ElementsAre("x", "y"));
  EXPECT_EQ(ck.bytes("y")[2], std::byte{8});
}

TEST(ShardedCheckpoint, UnindexedDuplicateNameRefused) {
  TempDir dir;
  SafetensorsWriter w;
  w.add("x", DType::kU8, {2}, filled(2, 7));
  w.write(dir / "one.safetensors");
  w.write(dir / "two.safetensors");
  const std::string msg = error_of(dir.path());
  EXPECT_THAT(msg, HasSubstr(dir.path().string()));
  EXPECT_THAT(msg, HasSubstr("tensor 'x' is in both one.safetensors and two.safetensors"));
}

TEST(ShardedCheckpoint, MissingShardNamesIndexAndShard) {
  TempDir dir;
  five_tensors().write_sharded(dir.path(), 2500);
  std::filesystem::remove(dir / "model-00002-of-00003.safetensors");
  const std::string msg = error_of(dir.path());
  EXPECT_THAT(msg, HasSubstr((dir / "model.safetensors.index.json").string()));
  EXPECT_THAT(msg, HasSubstr("shard 'model-00002-of-00003.safetensors' (for tensor 'c') does not exist"));
}

TEST(ShardedCheckpoint, TensorMissingFromItsShardNamesIndex) {
  TempDir dir;
  five_tensors().write_sharded(dir.path(), 2500);
  auto index = nlohmann::json::parse(testing::read_file(dir / "model.safetensors.index.json"));
  index["weight_map"]["ghost"] = "model-00001-of-00003.safetensors";
  testing::write_file(dir / "model.safetensors.index.json", index.dump());
  const std::string msg = error_of(dir.path());
  EXPECT_THAT(msg, HasSubstr((dir / "model.safetensors.index.json").string()));
  EXPECT_THAT(msg, HasSubstr("tensor 'ghost' is mapped to shard 'model-00001-of-00003.safetensors', which has no such tensor"));
}

TEST(ShardedCheckpoint, TensorsLeftOutOfWeightMapAreReported) {
  TempDir dir;
  five_tensors().write_sharded(dir.path(), 2500);
  auto index = nlohmann::json::parse(testing::read_file(dir / "model.safetensors.index.json"));
  index["weight_map"].erase("b");
  testing::write_file(dir / "model.safetensors.index.json", index.dump());
  auto ck = ShardedCheckpoint::open(dir.path());
  EXPECT_FALSE(ck.contains("b"));
  EXPECT_THAT(ck.unindexed_tensors(), ElementsAre("b"));
}

TEST(ShardedCheckpoint, BadShardFileNamesTheShard) {
  TempDir dir;
  five_tensors().write_sharded(dir.path(), 2500);
  testing::write_file(dir / "model-00003-of-00003.safetensors", "short");
  const std::string msg = error_of(dir.path());
  EXPECT_THAT(msg, HasSubstr((dir / "model-00003-of-00003.safetensors").string() + ": truncated"));
}

TEST(ShardedCheckpoint, IndexNotJsonNamesIndex) {
  TempDir dir;
  testing::write_file(dir / "model.safetensors.index.json", "{\"weight_map\": ");
  EXPECT_THAT(error_of(dir.path()), HasSubstr("model.safetensors.index.json: index is not valid JSON"));
}

TEST(ShardedCheckpoint, IndexWithoutWeightMap) {
  TempDir dir;
  testing::write_file(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  EXPECT_THAT(error_of(dir.path()), HasSubstr("model.safetensors.index.json: missing 'weight_map'"));
}

TEST(ShardedCheckpoint, IndexShardOutsideDirectoryRefused) {
  TempDir dir;
  testing::write_file(dir / "model.safetensors.index.json", R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  EXPECT_THAT(error_of(dir.path()), HasSubstr("is not a relative path inside the model directory"));
}

TEST(ShardedCheckpoint, IndexDuplicateTensorRefused) {
  TempDir dir;
  testing::write_file(dir / "model.safetensors.index.json",
                      R"({"weight_map": {"a": "x.safetensors", "a": "y.safetensors"}})");
  EXPECT_THAT(error_of(dir.path()), HasSubstr("index has duplicate key 'a'"));
}

TEST(ShardedCheckpoint, EmptyDirectoryRefused) {
  TempDir dir;
  EXPECT_THAT(error_of(dir.path()), HasSubstr("no model.safetensors, model.safetensors.index.json or other *.safetensors"));
}

TEST(ShardedCheckpoint, NotADirectory) {
  TempDir dir;
  EXPECT_THAT(error_of(dir / "missing"), HasSubstr("not a directory"));
}

TEST(ShardedCheckpoint, UnknownTensorNamesIndex) {
  TempDir dir;
  five_tensors().write_sharded(dir.path(), 2500);
  auto ck = ShardedCheckpoint::open(dir.path());
  try {
    (void)ck.at("model.nope");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("model.safetensors.index.json: no tensor named 'model.nope'"));
  }
}

}  // namespace
}  // namespace fp4serve
