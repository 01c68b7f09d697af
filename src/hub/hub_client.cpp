#include "hub/hub_client.h"

#include <curl/curl.h>

#include <cctype>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "hub/hub_error.h"

namespace fp4serve::hub {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  HttpResponse* response;
  const HubClient::Sink* sink;
  CURL* handle = nullptr;
  bool stopped = false;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {
    t->response->headers.clear();  // a new response (after a redirect or 100-continue)
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon == std::string::npos) return size * n;
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string value = line.substr(colon + 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.front()))) value.erase(0, 1);
  while (!value.empty() && std::isspace(static_cast<unsigned char>(value.back()))) value.pop_back();
  t->response->headers[name] = value;
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long code = 0;
  curl_easy_getinfo(t->handle, CURLINFO_RESPONSE_CODE, &code);
  // Only a successful response's body is the file; an error page is kept for the message.
  if (t->sink && code >= 200 && code < 300) {
    if (!(*t->sink)(code, data, bytes)) {
      t->stopped = true;
      return 0;  // CURLE_WRITE_ERROR
    }
    return bytes;
  }
  if (t->response->body.size() < (1u << 24)) t->response->body.append(data, bytes);
  return bytes;
}

// "scheme://host:port" of a URL (the whole URL when it has no path).
std::string origin_of(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t path = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

std::string url_quote(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

HubClient::HubClient(HubSettings settings) : settings_(std::move(settings)) { global_init(); }

std::string HubClient::revision_api_url(std::string_view repo_id, std::string_view revision) const {
  return settings_.endpoint + "/api/models/" + std::string(repo_id) + "/revision/" + url_quote(revision);
}

std::string HubClient::resolve_url(std::string_view repo_id, std::string_view revision,
                                   std::string_view filename) const {
  return settings_.endpoint + "/" + std::string(repo_id) + "/resolve/" + url_quote(revision) + "/" +
         url_quote(filename, true);
}

HttpResponse HubClient::perform(Method method, const std::string& url, bool follow, uint64_t offset,
                                const Sink* sink) const {
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
  if (!curl) throw HubError(HubErrorKind::kNetwork, "libcurl could not start a transfer");
  HttpResponse r;
  Transfer t{&r, sink, curl.get()};
  char errbuf[CURL_ERROR_SIZE] = {0};
  struct curl_slist* headers = nullptr;
  // The token goes to the endpoint only: a CDN URL is signed (huggingface_hub drops auth there too).
  if (settings_.token && origin_of(url) == origin_of(settings_.endpoint))
    headers = curl_slist_append(headers, ("Authorization: Bearer " + *settings_.token).c_str());
  headers = curl_slist_append(headers, "Accept-Encoding: identity");
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> header_guard(headers, curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "fp4serve/0.1 (huggingface_hub-compatible)");
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  if (method == Method::kHead) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  } else if (sink == nullptr) {
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
  } else {
    // A download may take hours; a stalled one (under 1 byte/s for 30 s) is a broken one.
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
    // Error statuses keep their body for the message instead of going to the sink.
    curl_easy_setopt(c, CURLOPT_FAILONERROR, 0L);
  }
  std::string range;
  if (offset > 0) {
    range = fmt::format("{}-", offset);
    curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  }
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  char* eff = nullptr;
  curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff);
  if (eff) r.url = eff;
  if (t.stopped) {
    r.status = -1;
    return r;
  }
  if (rc != CURLE_OK) {
    const std::string why = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
    throw HubError(HubErrorKind::kNetwork, fmt::format("{} {}: {}", method == Method::kHead ? "HEAD" : "GET", url, why));
  }
  return r;
}

HttpResponse HubClient::get(const std::string& url) const { return perform(Method::kGet, url, true, 0, nullptr); }

HttpResponse HubClient::head(const std::string& url) const {
  std::string u = url;
  for (int hop = 0; hop < 10; ++hop) {
    HttpResponse r = perform(Method::kHead, u, false, 0, nullptr);
    const std::string loc = r.header("location");
    // follow_relative_redirects: a path on the same host (a renamed repository), never the CDN.
    if (r.status >= 300 && r.status < 400 && !loc.empty() && loc.front() == '/') {
      u = origin_of(u) + loc;
      continue;
    }
    return r;
  }
  throw HubError(HubErrorKind::kHttp, "HEAD " + url + ": too many redirects");
}

HttpResponse HubClient::get_to(const std::string& url, uint64_t offset, const Sink& sink) const {
  return perform(Method::kGet, url, true, offset, &sink);
}

void HubClient::raise_for_status(const HttpResponse& r, const std::string& what) const {
  if (r.status >= 200 && r.status < 300) return;
  const std::string code = r.header("x-error-code");
  const std::string server_msg = r.header("x-error-message");
  const std::string detail = server_msg.empty() ? "" : " (hub says: " + server_msg + ")";
  const std::string token_hint =
      settings_.token ? fmt::format("the token from {} was sent and was not accepted for it", settings_.token_source)
                      : fmt::format("no token was sent: set HF_TOKEN, or put one in {} (`hf auth login` writes "
                                    "it there; HF_TOKEN_PATH moves it); token lookup: {}",
                                    settings_.token_path, settings_.token_source);
  if (code == "GatedRepo" || ((r.status == 401 || r.status == 403) && code != "RepoNotFound")) {
    throw HubError(HubErrorKind::kAuth,
                   fmt::format("{}: HTTP {} from {}: the repository is gated or private (or does not exist), so a "
                               "token with access is needed; {}{}",
                               what, r.status, r.url, token_hint, detail));
  }
  if (code == "RevisionNotFound") {
    throw HubError(HubErrorKind::kNotFound,
                   fmt::format("{}: revision not found (HTTP {} from {}){}", what, r.status, r.url, detail));
  }
  if (code == "EntryNotFound") {
    throw HubError(HubErrorKind::kNotFound,
                   fmt::format("{}: file not found in the repository (HTTP {} from {}){}", what, r.status, r.url, detail));
  }
  if (code == "RepoNotFound" || r.status == 404) {
    throw HubError(HubErrorKind::kNotFound,
                   fmt::format("{}: repository or revision not found (HTTP {} from {}){}; if it is private, a token "
                               "is needed: {}",
                               what, r.status, r.url, detail, token_hint));
  }
  throw HubError(HubErrorKind::kHttp, fmt::format("{}: HTTP {} from {}{}", what, r.status, r.url, detail));
}

}  // namespace fp4serve::hub
