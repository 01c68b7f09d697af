// LoadedCheckpoint: a checkpoint that matches its config loads; every kind of mismatch is reported
// by tensor name, all of them in one message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weight_loader.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTinyConfig = testing::tiny_config_json(/*with_mtp=*/false);

using Mutator = std::function<void(std::string& name, DType& dtype, std::vector<int64_t>& shape, bool& skip)>;

// Writes a checkpoint of zeros following the BF16 plan, after letting `mutate` change entries.
void write_checkpoint(const std::filesystem::path& dir, const Mutator& mutate = {},
                      const std::vector<std::pair<std::string, std::vector<int64_t>>>& extra = {}) {
  testing::write_file(dir / "config.json", kTinyConfig);
  const ModelConfig c = ModelConfig::parse(kTinyConfig);
  const TensorPlan plan = make_tensor_plan(c, [](std::string_view) { return WeightFormat::bf16(); }, ExpertStorage::kFused);
  SafetensorsWriter w;
  auto zeros = [](uint64_t, std::span<std::byte> chunk) { std::memset(chunk.data(), 0, chunk.size()); };
  for (const auto* t : plan.all_tensors()) {
    std::string name = t->name;
    DType dtype = t->dtype;
    std::vector<int64_t> shape = t->shape;
    bool skip = false;
    if (mutate) mutate(name, dtype, shape, skip);
    if (!skip) w.add(name, dtype, shape, zeros);
  }
  for (const auto& [name, shape] : extra) w.add(name, DType::kBF16, shape, zeros);
  w.write(dir / "model.safetensors");
}

std::string load_error(const std::filesystem::path& dir) {
  try {
    LoadedCheckpoint::open(dir.string());
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(WeightLoader, MatchingCheckpointLoads) {
  testing::TempDir dir;
  write_checkpoint(dir.path(), {}, {{"mtp.fc.weight", {64, 128}}, {"model.visual.merger.norm.weight", {8}}});
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
  EXPECT_EQ(ck.expert_storage(), ExpertStorage::kFused);
  EXPECT_EQ(ck.known_unused_tensors(), 2u);
  const WeightView w = ck.tensor("model.language_model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(w.info->shape, (std::vector<int64_t>{2 * 4 * 32, 64}));
  EXPECT_EQ(w.bytes.size(), 256u * 64u * 2u);
}

TEST(WeightLoader, ReportsEveryProblemByName) {
  testing::TempDir dir;
  write_checkpoint(
      dir.path(),
      [](std::string& name, DType& dtype, std::vector<int64_t>& shape, bool& skip) {
        if (name == "model.language_model.layers.0.linear_attn.in_proj_z.weight") skip = true;
        if (name == "model.language_model.layers.1.linear_attn.out_proj.weight") dtype = DType::kU8;
        if (name == "model.language_model.layers.3.self_attn.k_proj.weight") shape = {63, 64};
      },
      {{"model.language_model.layers.0.linear_attn.bogus.weight", {4}}});
  const std::string msg = load_error(dir.path());
  EXPECT_THAT(msg, HasSubstr(dir.path().string()));
  EXPECT_THAT(msg, HasSubstr("4 problems"));
  EXPECT_THAT(msg, HasSubstr("missing: model.language_model.layers.0.linear_attn.in_proj_z.weight (expected BF16 [64, 64])"));
  EXPECT_THAT(msg, HasSubstr("wrong dtype: model.language_model.layers.1.linear_attn.out_proj.weight is U8, expected BF16"));
  EXPECT_THAT(msg, HasSubstr("wrong shape: model.language_model.layers.3.self_attn.k_proj.weight is [63, 64], expected [64, 64]"));
  EXPECT_THAT(msg, HasSubstr("unexpected: model.language_model.layers.0.linear_attn.bogus.weight"));
}

TEST(WeightLoader, AcceptsF32OrBf16ForALog) {
  testing::TempDir dir;
  write_checkpoint(dir.path(), [](std::string& name, DType& dtype, std::vector<int64_t>&, bool&) {
    if (name.ends_with("A_log")) dtype = DType::kBF16;
  });
  EXPECT_EQ(load_error(dir.path()), "");
}

TEST(WeightLoader, PerExpertLayoutIsDetected) {
  testing::TempDir dir;
  // Replace the fused experts with per-expert tensors.
  write_checkpoint(dir.path(), [](std::string& name, DType&, std::vector<int64_t>&, bool& skip) {
    if (name.find("mlp.experts.") != std::string::npos) skip = true;
  }, [] {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    for (int l = 0; l < 4; ++l)
      for (int e = 0; e < 4; ++e) {
        const std::string p = "model.language_model.layers." + std::to_string(l) + ".mlp.experts." + std::to_string(e) + ".";
        t.push_back({p + "gate_proj.weight", {32, 64}});
        t.push_back({p + "up_proj.weight", {32, 64}});
        t.push_back({p + "down_proj.weight", {64, 32}});
      }
    return t;
  }());
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
  EXPECT_EQ(ck.expert_storage(), ExpertStorage::kPerExpert);
}

TEST(WeightLoader, MissingConfigFieldNamesTheField) {
  testing::TempDir dir;
  write_checkpoint(dir.path());
  std::string cfg = kTinyConfig;
  cfg.replace(cfg.find("\"hidden_size\": 64,"), std::strlen("\"hidden_size\": 64,"), "");
  testing::write_file(dir.path() / "config.json", cfg);
  const std::string msg = load_error(dir.path());
  EXPECT_THAT(msg, HasSubstr("config.json"));
  EXPECT_THAT(msg, HasSubstr("hidden_size"));
}

TEST(WeightLoader, MissingModelSaysWhereItLooked) {
  const std::string msg = load_error("/nonexistent/fp4serve/model");
  EXPECT_THAT(msg, HasSubstr("/nonexistent/fp4serve/model"));
}

}  // namespace
}  // namespace fp4serve
