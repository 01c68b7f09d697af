#include "server/http/tls_context_source.h"

#include <sys/stat.h>

namespace fp4serve::http {

TlsContextSource::TlsContextSource(TlsSettings settings)
    : settings_(std::move(settings)), stamps_(stamp_files()), current_(make_tls_context(settings_)) {}

std::shared_ptr<TlsContext> TlsContextSource::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::vector<TlsContextSource::FileStamp> TlsContextSource::stamp_files() const {
  std::vector<FileStamp> out;
  for (const std::string* path : {&settings_.certfile, &settings_.keyfile, &settings_.ca_certs}) {
    FileStamp stamp;
    struct stat st {};
    if (!path->empty() && ::stat(path->c_str(), &st) == 0) {
      stamp.mtime_ns = static_cast<long long>(st.st_mtim.tv_sec) * 1'000'000'000LL + st.st_mtim.tv_nsec;
      stamp.size = static_cast<long long>(st.st_size);
      stamp.inode = static_cast<unsigned long long>(st.st_ino);
    }
    out.push_back(stamp);
  }
  return out;
}

TlsContextSource::Reload TlsContextSource::reload_if_changed() {
  Reload result;
  std::vector<FileStamp> now = stamp_files();
  if (now == stamps_) return result;
  stamps_ = std::move(now);
  result.changed = true;
  try {
    std::shared_ptr<TlsContext> fresh = make_tls_context(settings_);
    std::lock_guard lock(mu_);
    current_ = std::move(fresh);
  } catch (const std::exception& e) {
    result.error = e.what();
  }
  return result;
}

}  // namespace fp4serve::http
