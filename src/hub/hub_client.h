// HTTP to a Hugging Face Hub endpoint over libcurl (TLS by the system's libcurl/OpenSSL): the three
// requests huggingface_hub makes for a snapshot (file_download.py, hf_api.py):
//   GET  {endpoint}/api/models/{repo}/revision/{revision}      the commit and the file list
//   HEAD {endpoint}/{repo}/resolve/{commit}/{file}            a file's metadata; redirects are not
//        followed except relative ones (a renamed repo), so the CDN's Location is read, not fetched
//   GET  the resolve URL or its CDN Location, with Range: bytes=N- to resume
// The token goes in "Authorization: Bearer ..." to the endpoint; libcurl does not send it on to
// another host when a redirect leaves the endpoint's host (the CDN needs none: its URL is signed).
// Status codes become HubErrors with huggingface_hub's meaning (hf_raise_for_status: X-Error-Code
// RepoNotFound / RevisionNotFound / EntryNotFound / GatedRepo, 401, 403, 404).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "hub/hub_settings.h"

namespace fp4serve::hub {

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names lowercased; the last response's headers
  std::string body;
  std::string url;  // the URL that answered (after redirects)
  std::string header(const std::string& lowercase_name) const;
};

class HubClient {
 public:
  explicit HubClient(HubSettings settings);

  const HubSettings& settings() const { return settings_; }
  std::string revision_api_url(std::string_view repo_id, std::string_view revision) const;
  std::string resolve_url(std::string_view repo_id, std::string_view revision, std::string_view filename) const;

  // Transport failures (no connection, DNS, timeout) throw HubError kNetwork naming the URL.
  HttpResponse get(const std::string& url) const;
  HttpResponse head(const std::string& url) const;
  // A 2xx body from `offset` on goes to `sink` with the status (200 where the server ignored the
  // Range: the bytes start at 0), which returns false to stop (the response then has
  // status -1). Redirects are followed. A transfer cut by the network throws kNetwork.
  using Sink = std::function<bool(long status, const char* data, size_t size)>;
  HttpResponse get_to(const std::string& url, uint64_t offset, const Sink& sink) const;

  // Throws the HubError a non-2xx response means; `what` says what was asked for
  // ("Qwen/X at revision main", "file config.json of Qwen/X").
  void raise_for_status(const HttpResponse& r, const std::string& what) const;

 private:
  enum class Method { kGet, kHead };
  HttpResponse perform(Method method, const std::string& url, bool follow, uint64_t offset, const Sink* sink) const;

  HubSettings settings_;
};

// Percent-encodes a path component as Python's quote(s, safe="") (keeps A-Za-z0-9 and "_.-~").
std::string url_quote(std::string_view s, bool keep_slash = false);

}  // namespace fp4serve::hub
