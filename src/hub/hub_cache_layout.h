// One repository's folder in the Hugging Face cache, laid out exactly as huggingface_hub writes it
// (file_download.py: _hf_hub_download_to_cache_dir, _create_symlink; _snapshot_download.py), so that
// transformers and vLLM read what fp4serve fetched and fp4serve reads what they fetched:
//
//   <root>/models--org--name/
//     blobs/<etag>                   file contents, named by the hub's etag (the sha256 of an LFS
//                                    file, the git blob sha1 of a small one)
//     blobs/<etag>.incomplete        a download in progress; resumed from its size by a later run
//     snapshots/<commit>/<filename>  relative symlink to ../../blobs/<etag> (one more ../ per
//                                    folder in filename)
//     refs/<revision>                the commit hash a branch or tag resolved to (no newline)
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace fp4serve::hub {

bool is_commit_hash(std::string_view s);  // 40 lowercase hex digits
bool is_sha256_hex(std::string_view s);   // 64 lowercase hex digits: an LFS etag
// An HTTP ETag header value as a file name: W/"x" and "x" -> x (_normalize_etag).
std::string normalize_etag(std::string_view etag);
// A repository file name that is safe to place under snapshots/ (no absolute path, no "..", no
// empty component, no backslash).
bool is_safe_repo_filename(std::string_view filename);

class HubCacheLayout {
 public:
  HubCacheLayout(std::filesystem::path root, std::string repo_id);

  const std::filesystem::path& root() const { return root_; }
  const std::string& repo_id() const { return repo_id_; }
  std::filesystem::path repo_dir() const;
  std::filesystem::path blobs_dir() const;
  std::filesystem::path blob(std::string_view etag) const;
  std::filesystem::path incomplete(std::string_view etag) const;
  std::filesystem::path snapshot_dir(std::string_view commit) const;
  std::filesystem::path snapshot_file(std::string_view commit, std::string_view filename) const;
  std::filesystem::path ref_file(std::string_view revision) const;

  // The commit a revision names: itself when it is a commit hash, else the refs file's content.
  std::optional<std::string> resolve_revision(std::string_view revision) const;
  // Writes refs/<revision> = commit (temp file + rename, so a reader never sees half of it).
  void write_ref(std::string_view revision, std::string_view commit) const;
  // snapshots/<commit>/<filename> -> blobs/<etag> as a relative symlink (replacing what was there).
  void link_snapshot_file(std::string_view commit, std::string_view filename, std::string_view etag) const;

  // "../../blobs/<etag>" for "model.safetensors", "../../../blobs/<etag>" for "sub/x.json".
  static std::string symlink_target(std::string_view filename, std::string_view etag);

 private:
  std::filesystem::path root_;
  std::string repo_id_;
};

}  // namespace fp4serve::hub
