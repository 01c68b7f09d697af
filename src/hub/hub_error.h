// The one exception type of the hub module: what went wrong, of which kind, said so that a user can
// act on it (a token needed and where it is read from; a repository or revision that does not
// exist; the disk space missing; the URL that could not be reached).
#pragma once

#include <stdexcept>
#include <string>

namespace fp4serve::hub {

enum class HubErrorKind {
  kAuth,      // 401/403: gated or private repository, or a bad token
  kNotFound,  // 404: repository, revision or file
  kNetwork,   // the endpoint could not be reached, or the connection broke for good
  kDiskFull,  // not enough free space for what is to be downloaded
  kOffline,   // HF_HUB_OFFLINE and the cache lacks what is needed
  kCorrupt,   // a blob's size or sha256 is not what the hub announced
  kHttp,      // any other HTTP status
};

class HubError : public std::runtime_error {
 public:
  HubError(HubErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  HubErrorKind kind() const { return kind_; }

 private:
  HubErrorKind kind_;
};

}  // namespace fp4serve::hub
