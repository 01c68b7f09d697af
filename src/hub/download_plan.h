// What a snapshot download fetches: the revision's commit and file list (the hub's
// GET /api/models/{repo}/revision/{revision}: {"sha": commit, "siblings": [{"rfilename": ...}]}),
// narrowed to the files serving reads, then per file the metadata of its resolve URL (a HEAD on
// {endpoint}/{repo}/resolve/{commit}/{file}: X-Repo-Commit, X-Linked-Etag or ETag, X-Linked-Size or
// Content-Length, and Location when the hub redirects to its CDN) and what the cache already holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::hub {

struct RepoRevision {
  std::string commit;               // "sha"
  std::vector<std::string> files;   // every "rfilename"
};
// Throws HubError (kHttp) naming what is missing when the body is not the API's shape.
RepoRevision parse_revision_info(std::string_view json_text);

// The files `serve` reads, at the top of the repository: weights (*.safetensors and their
// index), configs (config, generation, quantization), tokenizer files and the chat template,
// preprocessor configs. Not README, images, *.bin/*.pt/*.gguf copies, or sub-folders (original/).
bool serving_needs(std::string_view filename);
std::vector<std::string> serving_files(const std::vector<std::string>& files);

// One file's metadata from its resolve URL.
struct FileMetadata {
  std::string commit;    // X-Repo-Commit
  std::string etag;      // normalized X-Linked-Etag, else ETag
  uint64_t size = 0;     // X-Linked-Size, else Content-Length
  std::string location;  // Location when redirected (the CDN), else the resolve URL
};

struct PlannedFile {
  std::string filename;
  FileMetadata meta;
  bool cached = false;          // blobs/<etag> already holds it
  uint64_t partial_bytes = 0;   // bytes in blobs/<etag>.incomplete to resume from
};

struct DownloadPlan {
  std::string commit;
  std::vector<PlannedFile> files;
  uint64_t total_bytes() const;      // of every file
  uint64_t remaining_bytes() const;  // still to be transferred
  size_t files_to_fetch() const;
};

}  // namespace fp4serve::hub
