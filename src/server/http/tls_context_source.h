// The TLS context new connections get, and --enable-ssl-refresh's reload of it.
//
// vLLM's SSLCertRefresher (vllm/entrypoints/ssl.py) watches the key, certificate and CA files and
// loads them again into the live context when they change: new handshakes present the new
// certificate, connections already up keep theirs, and a reload that fails is logged and leaves
// the old one in place. Here the server polls the files' stamps (modification time, size, inode,
// following symlinks, so a Kubernetes secret's symlink swap counts) and a change rebuilds the whole
// context with make_tls_context; the new context replaces the current one only if it loads, so a
// certificate written before its key keeps serving the old pair until the key follows.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/http/tls_context.h"

namespace fp4serve::http {

class TlsContextSource {
 public:
  // Builds the first context; throws TlsConfigError.
  explicit TlsContextSource(TlsSettings settings);

  // Any thread.
  std::shared_ptr<TlsContext> current() const;

  struct Reload {
    bool changed = false;  // a file changed since the last look
    std::string error;     // the rebuild failed (the previous context stays); empty on success
  };
  // Compares the files' stamps with the last look and rebuilds on a change. One caller at a time.
  Reload reload_if_changed();

  const TlsSettings& settings() const { return settings_; }

 private:
  struct FileStamp {
    long long mtime_ns = -1;
    long long size = -1;
    unsigned long long inode = 0;
    bool operator==(const FileStamp&) const = default;
  };
  std::vector<FileStamp> stamp_files() const;

  const TlsSettings settings_;
  std::vector<FileStamp> stamps_;
  mutable std::mutex mu_;
  std::shared_ptr<TlsContext> current_;
};

}  // namespace fp4serve::http
