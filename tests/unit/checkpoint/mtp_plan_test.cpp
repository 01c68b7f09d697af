// The MTP block (mtp.*) is planned and checked apart from the text model: a complete block makes
// has_mtp(), in either expert storage; a broken or partial one never stops the checkpoint from
// loading but names every problem for the speculative-decoding refusal; none at all says so.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>

#include "checkpoint/safetensors_writer.h"
#include "checkpoint/weight_loader.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;

const std::string kConfig = testing::tiny_config_json(/*with_mtp=*/true);

TensorPlan bf16_plan(const ModelConfig& c, ExpertStorage s) {
  return make_mtp_plan(c, [](std::string_view) { return WeightFormat::bf16(); }, s);
}

using Edit = std::function<void(std::string& name, std::vector<int64_t>& shape, bool& skip)>;

// Zeros for the text model (fused experts) and, unless mtp is null, the MTP block after `edit`.
void write(const std::filesystem::path& dir, const TensorPlan* mtp, const Edit& edit = {}) {
  testing::write_file(dir / "config.json", kConfig);
  const ModelConfig c = ModelConfig::parse(kConfig);
  const auto bf16 = [](std::string_view) { return WeightFormat::bf16(); };
  SafetensorsWriter w;
  auto zeros = [](uint64_t, std::span<std::byte> chunk) { std::memset(chunk.data(), 0, chunk.size()); };
  const TensorPlan text = make_tensor_plan(c, bf16, ExpertStorage::kFused);
  for (const auto* t : text.all_tensors()) w.add(t->name, t->dtype, t->shape, zeros);
  if (mtp) {
    for (const auto* t : mtp->all_tensors()) {
      if (t->optional) continue;
      std::string name = t->name;
      std::vector<int64_t> shape = t->shape;
      bool skip = false;
      if (edit) edit(name, shape, skip);
      if (!skip) w.add(name, t->dtype, shape, zeros);
    }
  }
  w.write(dir / "model.safetensors");
}

TEST(MtpPlan, TheReleasesNineteenTensorsFusedAndPerExpertToo) {
  const ModelConfig c = ModelConfig::parse(kConfig);
  EXPECT_EQ(bf16_plan(c, ExpertStorage::kFused).all_tensors().size(), 19u);
  // Per expert: 3 tensors per expert instead of the two fused ones.
  EXPECT_EQ(bf16_plan(c, ExpertStorage::kPerExpert).all_tensors().size(), 19u - 2u + 3u * 4u);
  const TensorPlan p = bf16_plan(c, ExpertStorage::kFused);
  const auto fc = std::find_if(p.modules.begin(), p.modules.end(), [](const auto& m) { return m.path == "mtp.fc"; });
  ASSERT_NE(fc, p.modules.end());
  EXPECT_EQ(fc->out_features, 64);
  EXPECT_EQ(fc->in_features, 128);  // concat(embedding, hidden)
}

TEST(MtpPlan, ACompleteBlockIsUsableInEitherStorage) {
  const ModelConfig c = ModelConfig::parse(kConfig);
  for (ExpertStorage s : {ExpertStorage::kFused, ExpertStorage::kPerExpert}) {
    testing::TempDir dir;
    const TensorPlan mtp = bf16_plan(c, s);
    write(dir.path(), &mtp);
    const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
    EXPECT_TRUE(ck.has_mtp()) << ck.mtp_unavailable_reason();
    EXPECT_EQ(ck.mtp_expert_storage(), s);
    EXPECT_EQ(ck.mtp_unavailable_reason(), "");
  }
}

TEST(MtpPlan, ABrokenBlockLoadsTheTextModelAndNamesEveryProblem) {
  const ModelConfig c = ModelConfig::parse(kConfig);
  testing::TempDir dir;
  const TensorPlan mtp = bf16_plan(c, ExpertStorage::kFused);
  write(dir.path(), &mtp, [](std::string& name, std::vector<int64_t>& shape, bool& skip) {
    if (name == "mtp.norm.weight") skip = true;
    if (name == "mtp.fc.weight") shape = {64, 64};
    if (name == "mtp.pre_fc_norm_hidden.weight") name = "mtp.pre_fc_norm_hiden.weight";
  });
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
  EXPECT_FALSE(ck.has_mtp());
  const std::string why = ck.mtp_unavailable_reason();
  EXPECT_THAT(why, HasSubstr("is not usable: 4 problems"));
  EXPECT_THAT(why, HasSubstr("missing: mtp.norm.weight"));
  EXPECT_THAT(why, HasSubstr("wrong shape: mtp.fc.weight is [64, 64], expected [64, 128]"));
  EXPECT_THAT(why, HasSubstr("missing: mtp.pre_fc_norm_hidden.weight"));
  EXPECT_THAT(why, HasSubstr("unexpected: mtp.pre_fc_norm_hiden.weight"));
}

TEST(MtpPlan, NoBlockSaysSo) {
  testing::TempDir dir;
  write(dir.path(), nullptr);
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
  EXPECT_FALSE(ck.has_mtp());
  EXPECT_THAT(ck.mtp_unavailable_reason(), HasSubstr("no mtp.* tensors"));
  EXPECT_TRUE(ck.mtp_problems().empty());
}

}  // namespace
}  // namespace fp4serve
