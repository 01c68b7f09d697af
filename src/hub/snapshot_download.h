// `fp4serve serve ORG/NAME` as `vllm serve ORG/NAME`: the files serving needs of one revision, in
// the Hugging Face cache (hub_cache_layout.h), downloaded when missing -- huggingface_hub's
// snapshot_download(allow_patterns=...) step for step:
//   1. online: GET /api/models/{repo}/revision/{revision} -> commit + file list; offline
//      (HF_HUB_OFFLINE) or the endpoint unreachable: the cached snapshot refs/<revision> names, if any
//   2. files already linked in snapshots/<commit>/ are done (no request, as hf_hub_download with a
//      commit hash); for the rest a HEAD on the resolve URL gives etag, size and CDN location
//   3. free space checked against what is left to fetch; up to max_workers files at once
//      (blob_download.h: ranged, resumed, sha256-checked), one progress line with GB/s and ETA
//   4. snapshots/<commit>/<file> -> ../../blobs/<etag>, then refs/<revision> = commit
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "hub/hub_settings.h"

namespace fp4serve::hub {

struct SnapshotResult {
  std::filesystem::path dir;  // snapshots/<commit>
  std::string commit;
  int files_downloaded = 0;
  uint64_t bytes_downloaded = 0;
  double seconds = 0;
  bool offline = false;  // served from the cache without asking the hub
};

// Throws HubError with a message that says what was tried and what to do.
SnapshotResult snapshot_download(const std::string& repo_id, const std::string& revision, const HubSettings& settings,
                                 bool show_progress = true);

}  // namespace fp4serve::hub
