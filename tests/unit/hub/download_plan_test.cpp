// Which files serving downloads, the API's revision answer, and the bytes left to fetch.
#include "hub/download_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "hub/hub_error.h"
#include "hub/sha256.h"

namespace fp4serve::hub {
namespace {

using ::testing::ElementsAre;

TEST(DownloadPlan, ServingFilesOnly) {
  const std::vector<std::string> repo = {
      ".gitattributes", "README.md", "config.json", "generation_config.json", "hf_quant_config.json",
      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
      "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "chat_template.jinja",
      "preprocessor_config.json", "pytorch_model.bin", "model.gguf", "original/model.safetensors", "figure.png"};
  EXPECT_THAT(serving_files(repo),
              ElementsAre("config.json", "generation_config.json", "hf_quant_config.json",
                          "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                          "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
                          "merges.txt", "chat_template.jinja", "preprocessor_config.json"));
}

TEST(DownloadPlan, ParsesTheRevisionApi) {
  const auto r = parse_revision_info(
      R"({"id":"org/tiny","sha":"0123456789abcdef0123456789abcdef01234567","siblings":[{"rfilename":"config.json"},{"rfilename":"model.safetensors"}]})");
  EXPECT_EQ(r.commit, "0123456789abcdef0123456789abcdef01234567");
  EXPECT_THAT(r.files, ElementsAre("config.json", "model.safetensors"));
  EXPECT_THROW(parse_revision_info(R"({"id":"org/tiny"})"), HubError);
  EXPECT_THROW(parse_revision_info("<html>"), HubError);
}

TEST(DownloadPlan, RemainingBytesCountPartialsAndSkipCachedFiles) {
  DownloadPlan p;
  p.files.push_back({"a", {"", "e1", 100, ""}, true, 0});
  p.files.push_back({"b", {"", "e2", 1000, ""}, false, 400});
  p.files.push_back({"c", {"", "e3", 50, ""}, false, 0});
  EXPECT_EQ(p.total_bytes(), 1150u);
  EXPECT_EQ(p.remaining_bytes(), 650u);
  EXPECT_EQ(p.files_to_fetch(), 2u);
}

TEST(Sha256, KnownDigest) {
  Sha256 h;
  h.update("ab", 2);
  h.update("c", 1);
  EXPECT_EQ(h.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace fp4serve::hub
