// The cache layout huggingface_hub writes (blobs, snapshots with relative symlinks, refs) and the
// etag/file-name rules, on a temporary directory.
#include "hub/hub_cache_layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fp4serve::hub {
namespace {

namespace fs = std::filesystem;

fs::path temp_root(const char* name) {
  const fs::path p = fs::temp_directory_path() / ("fp4serve-hub-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kSha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

TEST(HubCacheLayout, PathsAreHuggingFaceHubs) {
  const HubCacheLayout l("/c", "Qwen/Qwen3.6-35B-A3B");
  EXPECT_EQ(l.repo_dir(), fs::path("/c/models--Qwen--Qwen3.6-35B-A3B"));
  EXPECT_EQ(l.blob(kSha), fs::path("/c/models--Qwen--Qwen3.6-35B-A3B/blobs/" + kSha));
  EXPECT_EQ(l.incomplete(kSha), fs::path("/c/models--Qwen--Qwen3.6-35B-A3B/blobs/" + kSha + ".incomplete"));
  EXPECT_EQ(l.snapshot_file(kCommit, "config.json"),
            fs::path("/c/models--Qwen--Qwen3.6-35B-A3B/snapshots/" + kCommit + "/config.json"));
  EXPECT_EQ(l.ref_file("main"), fs::path("/c/models--Qwen--Qwen3.6-35B-A3B/refs/main"));
}

TEST(HubCacheLayout, SymlinkTargetsClimbOneFolderPerPathComponent) {
  EXPECT_EQ(HubCacheLayout::symlink_target("model.safetensors", kSha), "../../blobs/" + kSha);
  EXPECT_EQ(HubCacheLayout::symlink_target("original/params.json", "abc"), "../../../blobs/abc");
}

TEST(HubCacheLayout, LinkedSnapshotFileReadsTheBlob) {
  const fs::path root = temp_root("link");
  const HubCacheLayout l(root, "org/tiny");
  fs::create_directories(l.blobs_dir());
  std::ofstream(l.blob("abc")) << "hello";
  l.link_snapshot_file(kCommit, "config.json", "abc");
  l.link_snapshot_file(kCommit, "config.json", "abc");  // replacing an existing link is fine
  const fs::path f = l.snapshot_file(kCommit, "config.json");
  ASSERT_TRUE(fs::is_symlink(f));
  EXPECT_EQ(fs::read_symlink(f), fs::path("../../blobs/abc"));
  std::ifstream in(f);
  std::string s;
  in >> s;
  EXPECT_EQ(s, "hello");
  fs::remove_all(root);
}

TEST(HubCacheLayout, RefsRoundTripWithoutNewline) {
  const fs::path root = temp_root("refs");
  const HubCacheLayout l(root, "org/tiny");
  EXPECT_FALSE(l.resolve_revision("main"));
  l.write_ref("main", kCommit);
  std::ifstream in(l.ref_file("main"), std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(raw, kCommit);  // huggingface_hub writes the bare hash
  EXPECT_EQ(l.resolve_revision("main"), kCommit);
  EXPECT_EQ(l.resolve_revision(kCommit), kCommit);  // a commit hash names itself
  std::ofstream(l.ref_file("broken")) << "not-a-hash";
  EXPECT_FALSE(l.resolve_revision("broken"));
  fs::remove_all(root);
}

TEST(HubCacheLayout, EtagsAndNames) {
  EXPECT_EQ(normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_TRUE(is_sha256_hex(kSha));
  EXPECT_FALSE(is_sha256_hex(kCommit));
  EXPECT_TRUE(is_commit_hash(kCommit));
  EXPECT_FALSE(is_commit_hash("main"));
  EXPECT_TRUE(is_safe_repo_filename("model-00001-of-00002.safetensors"));
  EXPECT_TRUE(is_safe_repo_filename("original/params.json"));
  EXPECT_FALSE(is_safe_repo_filename("../x"));
  EXPECT_FALSE(is_safe_repo_filename("/etc/passwd"));
  EXPECT_FALSE(is_safe_repo_filename("a//b"));
  EXPECT_FALSE(is_safe_repo_filename(""));
}

}  // namespace
}  // namespace fp4serve::hub
