#include "hub/blob_download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "hub/hub_cache_layout.h"
#include "hub/hub_error.h"
#include "hub/sha256.h"

namespace fp4serve::hub {
namespace {

namespace fs = std::filesystem;

class AppendFile {
 public:
  explicit AppendFile(const fs::path& p) : path_(p) {
    fd_ = ::open(p.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd_ < 0) throw HubError(HubErrorKind::kHttp, fmt::format("cannot write {}: {}", p.string(), std::strerror(errno)));
  }
  ~AppendFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Returns 0 or the errno of the failed write.
  int write(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      data += n;
      size -= static_cast<size_t>(n);
    }
    return 0;
  }
  void truncate() {
    if (::ftruncate(fd_, 0) != 0) throw HubError(HubErrorKind::kHttp, "cannot truncate " + path_.string());
  }

 private:
  fs::path path_;
  int fd_ = -1;
};

}  // namespace

void fetch_blob(const HubClient& client, const BlobJob& job, ByteProgress* progress, const BlobOptions& options) {
  std::error_code ec;
  fs::create_directories(job.incomplete.parent_path(), ec);
  uint64_t have = fs::exists(job.incomplete, ec) ? fs::file_size(job.incomplete, ec) : 0;
  if (have > job.size) {  // not a prefix of this blob: start again
    fs::remove(job.incomplete, ec);
    have = 0;
  }
  const bool check_sha = is_sha256_hex(job.etag);
  Sha256 hash;
  if (check_sha && have > 0) sha256_update_from_file(hash, job.incomplete, have);
  if (have > 0) {
    spdlog::info("resuming {} from {} of {} bytes ({})", job.filename, have, job.size, job.incomplete.string());
    if (progress) progress->add(0);
  }
  AppendFile out(job.incomplete);

  std::optional<HubError> stop_reason;
  bool too_long = false;
  for (int attempt = 0;; ++attempt) {
    if (have == job.size) break;
    const uint64_t offset = have;
    bool first = true;
    const HubClient::Sink sink = [&](long status, const char* data, size_t size) {
      if (options.cancel && options.cancel->load()) {
        stop_reason.emplace(HubErrorKind::kNetwork, "cancelled");
        return false;
      }
      if (first) {
        first = false;
        if (status == 200 && offset > 0) {  // the server ignored the Range: the body starts at 0
          out.truncate();
          hash.reset();
          have = 0;
        }
      }
      if (have + size > job.size) {
        too_long = true;
        return false;
      }
      if (const int err = out.write(data, size); err != 0) {
        stop_reason.emplace(err == ENOSPC || err == EDQUOT ? HubErrorKind::kDiskFull : HubErrorKind::kHttp,
                            fmt::format("writing {}: {}", job.incomplete.string(), std::strerror(err)));
        return false;
      }
      if (check_sha) hash.update(data, size);
      have += size;
      if (progress) progress->add(size);
      return true;
    };
    std::optional<HubError> transient;
    try {
      const HttpResponse r = client.get_to(job.url, offset, sink);
      if (r.status == -1) {
        if (too_long) break;
        throw *stop_reason;
      }
      if (r.status == 416 && offset == job.size) break;
      client.raise_for_status(r, fmt::format("file {}", job.filename));
      if (have == job.size) break;
      transient.emplace(HubErrorKind::kNetwork, fmt::format("GET {}: the body ended after {} of {} bytes", job.url, have, job.size));
    } catch (const HubError& e) {
      if (e.kind() != HubErrorKind::kNetwork || (options.cancel && options.cancel->load())) throw;
      transient = e;
    }
    if (attempt >= options.retries) {
      throw HubError(HubErrorKind::kNetwork,
                     fmt::format("{}: gave up after {} attempts: {}; {} of {} bytes kept in {} (the next run resumes "
                                 "from there)",
                                 job.filename, attempt + 1, transient->what(), have, job.size, job.incomplete.string()));
    }
    const double wait = std::min(8.0, options.backoff_seconds * static_cast<double>(1 << std::min(attempt, 4)));
    spdlog::warn("{}: {}; retrying from byte {} in {:.1f} s", job.filename, transient->what(), have, wait);
    std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }

  if (too_long) {
    fs::remove(job.incomplete, ec);
    throw HubError(HubErrorKind::kCorrupt, fmt::format("{}: the server sent more than the {} bytes the hub announced; "
                                                       "the download was discarded",
                                                       job.filename, job.size));
  }
  if (check_sha) {
    const std::string got = hash.hex_digest();
    if (got != job.etag) {
      fs::remove(job.incomplete, ec);
      throw HubError(HubErrorKind::kCorrupt,
                     fmt::format("{}: sha256 of the downloaded bytes is {}, the hub announced {}; the download was "
                                 "discarded and nothing was moved into the cache",
                                 job.filename, got, job.etag));
    }
  }
  fs::rename(job.incomplete, job.blob, ec);
  if (ec) throw HubError(HubErrorKind::kHttp, fmt::format("cannot move {} into place: {}", job.blob.string(), ec.message()));
}

}  // namespace fp4serve::hub
