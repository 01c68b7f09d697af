#include "hub/snapshot_download.h"

#include <sys/statvfs.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "checkpoint/progress.h"
#include "hub/blob_download.h"
#include "hub/download_plan.h"
#include "hub/hub_cache_layout.h"
#include "hub/hub_client.h"
#include "hub/hub_error.h"

namespace fp4serve::hub {
namespace {

namespace fs = std::filesystem;

std::string gb(uint64_t bytes) { return fmt::format("{:.2f} GB", static_cast<double>(bytes) / 1e9); }

// The files a cached snapshot must hold for serving: config.json and, when there is a safetensors
// index, every shard it names. Returns the first missing one ("" when complete).
std::string first_missing(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "config.json", ec)) return "config.json";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(index, ec)) {
    try {
      std::ifstream in(index);
      const auto j = nlohmann::json::parse(in);
      for (const auto& [name, file] : j.at("weight_map").items()) {
        (void)name;
        if (file.is_string() && !fs::exists(dir / file.get<std::string>(), ec)) return file.get<std::string>();
      }
    } catch (const std::exception&) {
      return "model.safetensors.index.json (unreadable)";
    }
  }
  return "";
}

// The cached snapshot `revision` names, when it holds what serving needs.
SnapshotResult from_cache(const HubCacheLayout& layout, const std::string& revision, const HubSettings& s,
                          const std::string& why_not_online) {
  const std::string where = fmt::format("{} (cache root from {})", layout.repo_dir().string(), s.cache_source);
  const auto commit = layout.resolve_revision(revision);
  std::error_code ec;
  if (!commit || !fs::is_directory(layout.snapshot_dir(*commit), ec)) {
    if (s.offline)
      throw HubError(HubErrorKind::kOffline,
                     fmt::format("{} at revision {} is not in the cache and HF_HUB_OFFLINE is set, so nothing is "
                                 "downloaded; looked at {} ({}); unset HF_HUB_OFFLINE to download it",
                                 layout.repo_id(), revision, where,
                                 commit ? "snapshot " + *commit + " missing" : "no refs/" + revision));
    throw HubError(HubErrorKind::kNetwork,
                   fmt::format("{} at revision {}: the hub could not be reached ({}) and nothing is cached at {}",
                               layout.repo_id(), revision, why_not_online, where));
  }
  const fs::path dir = layout.snapshot_dir(*commit);
  if (const std::string missing = first_missing(dir); !missing.empty()) {
    throw HubError(s.offline ? HubErrorKind::kOffline : HubErrorKind::kNetwork,
                   fmt::format("{} at revision {}: the cached snapshot {} lacks {}, and {}", layout.repo_id(), revision,
                               dir.string(), missing,
                               s.offline ? "HF_HUB_OFFLINE is set, so it is not downloaded"
                                         : "the hub could not be reached to fetch it (" + why_not_online + ")"));
  }
  if (!s.offline) spdlog::warn("{}: the hub could not be reached ({}); using the cached snapshot {}", layout.repo_id(),
                               why_not_online, dir.string());
  SnapshotResult r;
  r.dir = dir;
  r.commit = *commit;
  r.offline = true;
  return r;
}

FileMetadata file_metadata(const HubClient& client, const std::string& repo, const std::string& commit,
                           const std::string& filename) {
  const std::string url = client.resolve_url(repo, commit, filename);
  const HttpResponse r = client.head(url);
  if (r.status >= 400) client.raise_for_status(r, fmt::format("file {} of {} at {}", filename, repo, commit));
  FileMetadata m;
  m.commit = r.header("x-repo-commit");
  const std::string linked = r.header("x-linked-etag");
  m.etag = normalize_etag(linked.empty() ? r.header("etag") : linked);
  const std::string size = r.header("x-linked-size").empty() ? r.header("content-length") : r.header("x-linked-size");
  try {
    m.size = size.empty() ? 0 : std::stoull(size);
  } catch (const std::exception&) {
    m.size = 0;
  }
  m.location = r.header("location").empty() ? url : r.header("location");
  if (m.etag.empty() || size.empty())
    throw HubError(HubErrorKind::kHttp, fmt::format("HEAD {}: no ETag or size in the answer (HTTP {}); is {} a "
                                                    "Hugging Face Hub endpoint?",
                                                    url, r.status, client.settings().endpoint));
  if (m.etag.find('/') != std::string::npos || m.etag == "." || m.etag == "..")
    throw HubError(HubErrorKind::kHttp, fmt::format("HEAD {}: unusable ETag '{}'", url, m.etag));
  return m;
}

void check_free_space(const HubCacheLayout& layout, uint64_t needed) {
  std::error_code ec;
  fs::create_directories(layout.blobs_dir(), ec);
  if (ec) throw HubError(HubErrorKind::kHttp, fmt::format("cannot create {}: {}", layout.blobs_dir().string(), ec.message()));
  struct statvfs st {};
  if (::statvfs(layout.blobs_dir().c_str(), &st) != 0) return;
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes < needed)
    throw HubError(HubErrorKind::kDiskFull,
                   fmt::format("{}: {} still to download but only {} free on {}; free some space or point "
                               "--download-dir (or HF_HUB_CACHE) at a larger disk",
                               layout.repo_id(), gb(needed), gb(free_bytes), layout.blobs_dir().string()));
}

// Runs fn(i) for i in [0, n) on up to `workers` threads; the first exception is rethrown after all
// stop, and `cancel` tells the others to stop early.
template <typename Fn>
void parallel_for(size_t n, int workers, std::atomic<bool>& cancel, Fn fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::exception_ptr first;
  auto run = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n && !cancel.load();) {
      try {
        fn(i);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!first) first = std::current_exception();
        cancel = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min<int>(workers, static_cast<int>(n)); ++t) threads.emplace_back(run);
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace

SnapshotResult snapshot_download(const std::string& repo_id, const std::string& revision, const HubSettings& s,
                                 bool show_progress) {
  const HubCacheLayout layout(s.cache_root, repo_id);
  if (s.offline) return from_cache(layout, revision, s, "");
  const HubClient client(s);
  const auto t0 = std::chrono::steady_clock::now();

  RepoRevision info;
  const std::string api = client.revision_api_url(repo_id, revision);
  try {
    const HttpResponse r = client.get(api);
    client.raise_for_status(r, fmt::format("{} at revision {}", repo_id, revision));
    info = parse_revision_info(r.body);
  } catch (const HubError& e) {
    if (e.kind() != HubErrorKind::kNetwork) throw;
    return from_cache(layout, revision, s, e.what());
  }
  if (!is_commit_hash(info.commit))
    throw HubError(HubErrorKind::kHttp, fmt::format("GET {}: \"sha\" is not a commit hash: {}", api, info.commit));

  DownloadPlan plan;
  plan.commit = info.commit;
  for (const auto& f : serving_files(info.files)) {
    if (!is_safe_repo_filename(f)) throw HubError(HubErrorKind::kHttp, "the hub listed an unsafe file name: " + f);
    plan.files.push_back(PlannedFile{f, {}, false, 0});
  }
  if (plan.files.empty())
    throw HubError(HubErrorKind::kNotFound, fmt::format("{} at revision {} has no files serving reads (config.json, "
                                                        "*.safetensors, tokenizer files)",
                                                        repo_id, revision));

  // Metadata of the files not yet linked in this commit's snapshot, a few at a time.
  std::atomic<bool> cancel{false};
  parallel_for(plan.files.size(), s.max_workers, cancel, [&](size_t i) {
    PlannedFile& f = plan.files[i];
    std::error_code e1;
    if (fs::exists(layout.snapshot_file(plan.commit, f.filename), e1)) {
      f.cached = true;
      return;
    }
    f.meta = file_metadata(client, repo_id, plan.commit, f.filename);
    std::error_code e2;
    if (fs::exists(layout.blob(f.meta.etag), e2) && fs::file_size(layout.blob(f.meta.etag), e2) == f.meta.size) {
      layout.link_snapshot_file(plan.commit, f.filename, f.meta.etag);
      f.cached = true;
    } else if (fs::exists(layout.incomplete(f.meta.etag), e2)) {
      f.partial_bytes = fs::file_size(layout.incomplete(f.meta.etag), e2);
    }
  });

  SnapshotResult result;
  result.commit = plan.commit;
  result.dir = layout.snapshot_dir(plan.commit);
  const uint64_t remaining = plan.remaining_bytes();
  if (plan.files_to_fetch() > 0) {
    check_free_space(layout, remaining);
    spdlog::info("downloading {} at {} (commit {}): {} files, {} to fetch from {} into {}", repo_id, revision,
                 plan.commit, plan.files_to_fetch(), gb(remaining), s.endpoint, layout.repo_dir().string());
    // A bar for a download that ends in a blink is noise: shown from 64 MB up.
    ByteProgress progress("downloading " + repo_id, remaining, show_progress && remaining >= (uint64_t{64} << 20));
    cancel = false;
    BlobOptions opts;
    opts.cancel = &cancel;
    std::atomic<uint64_t> fetched{0};
    std::atomic<int> files{0};
    parallel_for(plan.files.size(), s.max_workers, cancel, [&](size_t i) {
      const PlannedFile& f = plan.files[i];
      if (f.cached) return;
      BlobJob job{f.filename, f.meta.location, f.meta.etag, f.meta.size, layout.blob(f.meta.etag),
                  layout.incomplete(f.meta.etag)};
      fetch_blob(client, job, &progress, opts);
      layout.link_snapshot_file(plan.commit, f.filename, f.meta.etag);
      fetched += f.meta.size - std::min(f.partial_bytes, f.meta.size);
      ++files;
    });
    progress.finish();
    result.files_downloaded = files.load();
    result.bytes_downloaded = fetched.load();
  }
  std::error_code ec;
  fs::create_directories(result.dir, ec);
  if (revision != plan.commit) layout.write_ref(revision, plan.commit);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (result.files_downloaded > 0) {
    spdlog::info("downloaded {} files of {} ({}) in {:.1f} s, {:.3f} GB/s", result.files_downloaded, repo_id,
                 gb(result.bytes_downloaded), result.seconds,
                 static_cast<double>(result.bytes_downloaded) / 1e9 / std::max(result.seconds, 1e-9));
  }
  return result;
}

}  // namespace fp4serve::hub
