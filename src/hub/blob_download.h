// One file of a snapshot, downloaded the way huggingface_hub downloads it (file_download.py:
// _download_to_tmp_and_move, http_get): into blobs/<etag>.incomplete, resumed from that file's size
// with Range: bytes=N- (a server that answers 200 instead of 206 restarts it from 0), retried on a
// broken connection, then checked -- the size the hub announced, and for an LFS file (64-hex etag)
// the sha256 of the bytes -- and only then renamed to blobs/<etag>. A torn or corrupt download is
// never moved into place: a short one stays .incomplete for the next run to resume, a corrupt one
// (wrong sha256, more bytes than announced) is deleted.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <string>

#include "checkpoint/progress.h"
#include "hub/hub_client.h"

namespace fp4serve::hub {

struct BlobJob {
  std::string filename;  // for messages
  std::string url;       // the resolve URL or its CDN location
  std::string etag;
  uint64_t size = 0;
  std::filesystem::path blob;
  std::filesystem::path incomplete;
};

struct BlobOptions {
  int retries = 5;                            // extra attempts after a broken connection
  double backoff_seconds = 0.5;               // doubled per attempt, at most 8 s
  const std::atomic<bool>* cancel = nullptr;  // another file failed: stop early
};

// Throws HubError: kNetwork (gave up), kCorrupt (size or sha256), kDiskFull (ENOSPC), kHttp/kAuth/
// kNotFound (status), kNetwork with "cancelled" when *cancel was set.
void fetch_blob(const HubClient& client, const BlobJob& job, ByteProgress* progress, const BlobOptions& options = {});

}  // namespace fp4serve::hub
