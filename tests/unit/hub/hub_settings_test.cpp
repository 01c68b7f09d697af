// The environment read as huggingface_hub reads it: endpoint, token and its file, offline, cache.
#include "hub/hub_settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace fp4serve::hub {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(HubSettings, Defaults) {
  const auto s = hub_settings("", env_of({{"HOME", "/nonexistent-home"}}));
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_FALSE(s.token);
  EXPECT_EQ(s.token_path, "/nonexistent-home/.cache/huggingface/token");
  EXPECT_FALSE(s.offline);
  EXPECT_EQ(s.cache_root, "/nonexistent-home/.cache/huggingface/hub");
}

TEST(HubSettings, EnvironmentAndDownloadDir) {
  const auto s = hub_settings("/data/models", env_of({{"HOME", "/h"},
                                                      {"HF_ENDPOINT", "http://127.0.0.1:9/"},
                                                      {"HF_TOKEN", "  hf_abc\n"},
                                                      {"HF_HUB_OFFLINE", "yes"},
                                                      {"HF_HUB_CACHE", "/elsewhere"}}));
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(s.token, "hf_abc");
  EXPECT_EQ(s.token_source, "$HF_TOKEN");
  EXPECT_TRUE(s.offline);
  EXPECT_EQ(s.cache_root, "/data/models");  // vLLM's --download-dir is huggingface_hub's cache_dir
  EXPECT_EQ(s.cache_source, "--download-dir");
}

TEST(HubSettings, TokenFileFromHfTokenPathOrHfHome) {
  const auto dir = std::filesystem::temp_directory_path() / ("fp4serve-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "token") << "hf_from_home\n";
  std::ofstream(dir / "other") << "hf_from_path";
  auto s = hub_settings("", env_of({{"HF_HOME", dir.string()}}));
  EXPECT_EQ(s.token, "hf_from_home");
  EXPECT_EQ(s.token_source, "file " + (dir / "token").string());
  EXPECT_EQ(s.cache_root, dir / "hub");
  s = hub_settings("", env_of({{"HF_HOME", dir.string()}, {"HF_TOKEN_PATH", (dir / "other").string()}}));
  EXPECT_EQ(s.token, "hf_from_path");
  s = hub_settings("", env_of({{"HF_HOME", dir.string()}, {"HF_TOKEN", ""}, {"HF_TOKEN_PATH", (dir / "none").string()}}));
  EXPECT_FALSE(s.token);
  EXPECT_NE(s.token_source.find((dir / "none").string()), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HubSettings, OfflineValues) {
  for (const char* v : {"1", "ON", "true", "Yes"}) EXPECT_TRUE(env_is_true(std::string(v))) << v;
  for (const char* v : {"0", "", "no", "off"}) EXPECT_FALSE(env_is_true(std::string(v))) << v;
  EXPECT_TRUE(hub_settings("", env_of({{"HOME", "/h"}, {"TRANSFORMERS_OFFLINE", "1"}})).offline);
}

}  // namespace
}  // namespace fp4serve::hub
