// locate_model: local directories, and repo ids found in a fake Hugging Face cache laid out as
// huggingface_hub lays it out. The environment is injected, never read from the process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "checkpoint/checkpoint_error.h"
#include "checkpoint/model_locator.h"
#include "checkpoint_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using testing::TempDir;

namespace fs = std::filesystem;

EnvLookup fake_env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

// <root>/models--Qwen--Qwen3.6-35B-A3B/{refs/main, snapshots/<commit>/config.json}
fs::path make_cached_repo(const fs::path& root, const std::string& ref = "main", const std::string& commit = kCommit) {
  const fs::path repo = root / "models--Qwen--Qwen3.6-35B-A3B";
  testing::write_file(repo / "refs" / ref, commit);  // huggingface_hub writes no newline
  testing::write_file(repo / "snapshots" / commit / "config.json", "{}");
  return repo / "snapshots" / commit;
}

std::string error_of(std::string_view model, std::string_view revision, const EnvLookup& env) {
  try {
    locate_model(model, revision, env);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "found " << model;
  return "";
}

TEST(HubCacheRoot, PrecedenceFollowsHuggingfaceHub) {
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HOME", "/h"}})).path, "/h/.cache/huggingface/hub");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}})).path, "/x/huggingface/hub");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"XDG_CACHE_HOME", "/x"}, {"HF_HOME", "/hf"}})).path, "/hf/hub");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HF_HOME", "/hf"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}})).path, "/legacy");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HUGGINGFACE_HUB_CACHE", "/legacy"}, {"HF_HUB_CACHE", "/new"}})).path, "/new");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HF_HUB_CACHE", "/new"}})).source, "$HF_HUB_CACHE");
}

TEST(HubCacheRoot, ExpandsTildeAndVariables) {
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HOME", "/h"}, {"HF_HOME", "~/hf"}})).path, "/h/hf/hub");
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"DISK", "/mnt/d"}, {"HF_HUB_CACHE", "$DISK/c/${DISK}"}})).path,
            "/mnt/d/c//mnt/d");
  // Unknown variables stay as written, like os.path.expandvars.
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HF_HUB_CACHE", "/a/$NOPE/b"}})).path, "/a/$NOPE/b");
}

TEST(HubCacheRoot, EmptyVariableCountsAsUnset) {
  EXPECT_EQ(hf_hub_cache_root(fake_env({{"HOME", "/h"}, {"HF_HOME", ""}})).path, "/h/.cache/huggingface/hub");
}

TEST(RepoFolderName, MatchesHuggingfaceHub) {
  EXPECT_EQ(hf_repo_folder_name("Qwen/Qwen3.6-35B-A3B"), "models--Qwen--Qwen3.6-35B-A3B");
  EXPECT_EQ(hf_repo_folder_name("gpt2"), "models--gpt2");
}

TEST(LocateModel, ExistingDirectoryIsUsedAsIs) {
  TempDir dir;
  EXPECT_EQ(locate_model(dir.path().string(), "main", fake_env({})), dir.path());
}

TEST(LocateModel, RepoIdFoundThroughRefsMain) {
  TempDir dir;
  const fs::path snapshot = make_cached_repo(dir / "hub");
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B", "main", fake_env({{"HF_HUB_CACHE", (dir / "hub").string()}})),
            snapshot);
}

TEST(LocateModel, RepoIdFoundUnderHfHome) {
  TempDir dir;
  const fs::path snapshot = make_cached_repo(dir / "hf" / "hub");
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B", "main", fake_env({{"HF_HOME", (dir / "hf").string()}})), snapshot);
}

TEST(LocateModel, RefWithTrailingNewlineIsTolerated) {
  TempDir dir;
  const fs::path snapshot = make_cached_repo(dir.path(), "main", kCommit);
  testing::write_file(dir / "models--Qwen--Qwen3.6-35B-A3B" / "refs" / "main", kCommit + "\n");
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B", "main", fake_env({{"HF_HUB_CACHE", dir.path().string()}})), snapshot);
}

TEST(LocateModel, ExplicitBranchRevision) {
  TempDir dir;
  const std::string other = "fedcba9876543210fedcba9876543210fedcba98";
  make_cached_repo(dir.path());
  const fs::path snapshot = make_cached_repo(dir.path(), "fp8", other);
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B", "fp8", fake_env({{"HF_HUB_CACHE", dir.path().string()}})), snapshot);
}

TEST(LocateModel, CommitHashRevisionSkipsRefs) {
  TempDir dir;
  const fs::path snapshot = make_cached_repo(dir.path());
  fs::remove_all(dir / "models--Qwen--Qwen3.6-35B-A3B" / "refs");
  EXPECT_EQ(locate_model("Qwen/Qwen3.6-35B-A3B", kCommit, fake_env({{"HF_HUB_CACHE", dir.path().string()}})), snapshot);
}

TEST(LocateModel, NotFoundListsEveryPlaceLooked) {
  TempDir dir;
  const std::string msg =
      error_of("Qwen/Qwen3.6-35B-A3B", "main", fake_env({{"HF_HUB_CACHE", (dir / "hub").string()}}));
  EXPECT_THAT(msg, HasSubstr("Qwen/Qwen3.6-35B-A3B: model not found"));
  EXPECT_THAT(msg, HasSubstr("local directory Qwen/Qwen3.6-35B-A3B: does not exist"));
  const fs::path repo = dir / "hub" / "models--Qwen--Qwen3.6-35B-A3B";
  EXPECT_THAT(msg, HasSubstr("revision file " + (repo / "refs" / "main").string() +
                             " (cache root from $HF_HUB_CACHE): repo not in cache"));
  EXPECT_THAT(msg, HasSubstr("snapshot " + (repo / "snapshots" / "main").string()));
}

TEST(LocateModel, RefPointsToMissingSnapshot) {
  TempDir dir;
  make_cached_repo(dir.path());
  fs::remove_all(dir / "models--Qwen--Qwen3.6-35B-A3B" / "snapshots");
  const std::string msg =
      error_of("Qwen/Qwen3.6-35B-A3B", "main", fake_env({{"HF_HUB_CACHE", dir.path().string()}}));
  EXPECT_THAT(msg, HasSubstr("snapshots/" + kCommit + " (cache root from $HF_HUB_CACHE): does not exist"));
}

TEST(LocateModel, ImplausibleRepoIdIsNotLookedUp) {
  const std::string msg = error_of("/no/such/dir/anywhere", "main", fake_env({{"HF_HUB_CACHE", "/tmp"}}));
  EXPECT_THAT(msg, HasSubstr("local directory /no/such/dir/anywhere: does not exist"));
  EXPECT_THAT(msg, HasSubstr("is not a repo id of the form org/name"));
}

}  // namespace
}  // namespace fp4serve
