#include "vision/media_source.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

#include <curl/curl.h>

#include "vision/image_error.h"

namespace fp4serve::vision {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Python's repr() of a short str, for vLLM's messages that print url[:32]!r.
std::string py_repr(std::string_view s) {
  std::string out = "'";
  for (unsigned char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c < 0x20) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

std::string py_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + py_repr(items[i]);
  return out + "]";
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

MediaBytes load_data_url(std::string_view url, const MediaFetchOptions& options) {
  // data:[<mediatype>][;<param>=<value>]*[;base64],<data>   (RFC 2397)
  const std::string_view rest = url.substr(5);
  const std::size_t comma = rest.find(',');
  if (comma == std::string_view::npos) {
    throw ImageError("Invalid data URL " + py_repr(url.substr(0, 32)) + ": missing ',' separator.");
  }
  const std::string_view spec = rest.substr(0, comma);
  const std::size_t semi = spec.rfind(';');
  if (semi == std::string_view::npos || spec.substr(semi + 1) != "base64") {
    throw ImageError("Only base64 data URLs are supported for now.");
  }
  std::string_view media_type = spec.substr(0, semi);
  media_type = media_type.substr(0, media_type.find(';'));
  const std::string_view payload = rest.substr(comma + 1);
  if (payload.size() / 4 * 3 > options.max_bytes) {
    throw ImageError("the data URL holds more than " + std::to_string(options.max_bytes) + " bytes");
  }
  return MediaBytes{decode_base64(payload), lower(media_type)};
}

MediaBytes load_file_url(std::string_view url, const MediaFetchOptions& options) {
  if (options.allowed_local_media_path.empty()) {
    throw ImageError("Cannot load local files without `--allowed-local-media-path`.");
  }
  // file://[host]/path: urllib3's netloc + path, percent-decoded (url2pathname).
  std::string raw(url.substr(7));
  const std::size_t cut = raw.find_first_of("?#");
  if (cut != std::string::npos) raw.resize(cut);
  std::string path;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
      path += static_cast<char>(std::stoi(raw.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      path += raw[i];
    }
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::path(path), ec);
  const fs::path root(options.allowed_local_media_path);
  bool inside = false;
  if (!ec) {
    // allowed in resolved.parents: a strict ancestor.
    for (fs::path p = resolved.parent_path(); !p.empty(); p = p.parent_path()) {
      if (p == root) {
        inside = true;
        break;
      }
      if (p == p.parent_path()) break;
    }
  }
  if (!inside) {
    throw ImageError("The file path " + path + " must be a subpath of `--allowed-local-media-path " +
                     options.allowed_local_media_path + "`.");
  }
  std::ifstream in(resolved, std::ios::binary);
  if (!in) throw ImageError("[Errno 2] No such file or directory: " + py_repr(path));
  const auto size = fs::file_size(resolved, ec);
  if (ec || !fs::is_regular_file(resolved)) throw ImageError("cannot read " + py_repr(path) + ": not a regular file");
  if (size > options.max_bytes) {
    throw ImageError("the file is " + std::to_string(size) + " bytes; at most " + std::to_string(options.max_bytes) +
                     " are accepted");
  }
  MediaBytes out;
  out.data.resize(size);
  in.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(size));
  if (!in) throw ImageError("cannot read " + py_repr(path));
  return out;
}

struct Download {
  std::vector<std::uint8_t> body;
  std::size_t max_bytes = 0;
  bool too_large = false;
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* d = static_cast<Download*>(user);
  if (d->body.size() + size * n > d->max_bytes) {
    d->too_large = true;
    return 0;  // aborts the transfer
  }
  d->body.insert(d->body.end(), data, data + size * n);
  return size * n;
}

std::string host_of(const std::string& url) {
  CURLU* h = curl_url();
  std::string host;
  if (h && curl_url_set(h, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK) {
    char* part = nullptr;
    if (curl_url_get(h, CURLUPART_HOST, &part, 0) == CURLUE_OK && part) {
      host = part;
      curl_free(part);
    }
  }
  if (h) curl_url_cleanup(h);
  return host;
}

void check_domain(const std::string& url, const MediaFetchOptions& options) {
  if (options.allowed_media_domains.empty()) return;
  const std::string host = host_of(url);
  if (std::find(options.allowed_media_domains.begin(), options.allowed_media_domains.end(), host) ==
      options.allowed_media_domains.end()) {
    throw ImageError("The URL must be from one of the allowed domains: " + py_list(options.allowed_media_domains) +
                     ". Input URL domain: " + host);
  }
}

MediaBytes fetch_http(const std::string& url, const MediaFetchOptions& options) {
  check_domain(url, options);
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) throw ImageError("Failed to fetch media from URL: cannot start the HTTP client");
  std::string current = url;
  const long timeout_ms = std::max(1L, static_cast<long>(options.fetch_timeout_s * 1000));
  for (int hop = 0; hop <= 10; ++hop) {
    Download d;
    d.max_bytes = options.max_bytes;
    char errbuf[CURL_ERROR_SIZE] = {};
    CURL* c = curl.get();
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, current.c_str());
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);  // the whole transfer, connect included
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);    // hops are followed below, each checked
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "fp4serve");
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(options.max_bytes));
    const CURLcode rc = curl_easy_perform(c);
    if (d.too_large || rc == CURLE_FILESIZE_EXCEEDED) {
      throw ImageError("Failed to fetch media from URL: the media is larger than " + std::to_string(options.max_bytes) +
                       " bytes");
    }
    if (rc == CURLE_OPERATION_TIMEDOUT) {
      throw ImageError("Failed to fetch media from URL: timed out after " + std::to_string(options.fetch_timeout_s) +
                       " s (VLLM_IMAGE_FETCH_TIMEOUT)");
    }
    if (rc != CURLE_OK) {
      throw ImageError(std::string("Failed to fetch media from URL: ") + (errbuf[0] ? errbuf : curl_easy_strerror(rc)));
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status >= 300 && status < 400) {
      char* location = nullptr;
      curl_easy_getinfo(c, CURLINFO_REDIRECT_URL, &location);
      if (!options.allow_redirects || !location) {
        throw ImageError("Failed to fetch media from URL: HTTP " + std::to_string(status) +
                         " redirect (redirects are off: VLLM_MEDIA_URL_ALLOW_REDIRECTS)");
      }
      const std::string next = location;
      if (lower(next.substr(0, 4)) != "http") {
        throw ImageError("The media URL must remain HTTP(S): " + py_repr(std::string_view(next).substr(0, 32)));
      }
      check_domain(next, options);
      current = next;
      continue;
    }
    if (status >= 400) throw ImageError("Failed to fetch media from URL: HTTP " + std::to_string(status) + " error");
    // No media type: a response's Content-Type is the server's guess (CDNs send WebP under
    // image/jpeg), and vLLM opens fetched bytes by their content alone.
    MediaBytes out;
    out.data = std::move(d.body);
    return out;
  }
  throw ImageError("Failed to fetch media from URL: too many redirects");
}

}  // namespace

void MediaFetchOptions::read_environment() {
  if (const char* t = std::getenv("VLLM_IMAGE_FETCH_TIMEOUT"); t && *t) {
    char* end = nullptr;
    const double v = std::strtod(t, &end);
    if (end && *end == '\0' && v > 0) fetch_timeout_s = v;
  }
  if (const char* r = std::getenv("VLLM_MEDIA_URL_ALLOW_REDIRECTS"); r && *r) {
    const std::string v = lower(r);
    allow_redirects = !(v == "0" || v == "false");
  }
}

std::string resolve_allowed_local_media_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec || !fs::exists(resolved)) {
    throw std::invalid_argument("Invalid `--allowed-local-media-path`: The path " + resolved.string() +
                                " does not exist.");
  }
  if (!fs::is_directory(resolved)) {
    throw std::invalid_argument("Invalid `--allowed-local-media-path`: The path " + resolved.string() +
                                " must be a directory.");
  }
  return resolved.string();
}

std::vector<std::uint8_t> decode_base64(std::string_view text) {
  // validate=True: only the alphabet and '=' padding at the end; the length a multiple of 4.
  std::vector<std::uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t pad = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = base64_value(c);
    if (v < 0 || pad > 0) throw ImageError("Invalid base64-encoded string: the data URL's payload is not base64");
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>((acc >> bits) & 0xFF));
    }
  }
  if (text.size() % 4 != 0 || pad > 2) throw ImageError("Incorrect padding: the data URL's base64 payload is cut");
  return out;
}

MediaBytes load_media_url(std::string_view url, const MediaFetchOptions& options) {
  const std::string scheme = lower(url.substr(0, std::min<std::size_t>(url.find(':'), url.size())));
  if (lower(url.substr(0, 5)) == "data:") return load_data_url(url, options);
  if (scheme == "http" || scheme == "https") return fetch_http(std::string(url), options);
  if (scheme == "file") return load_file_url(url, options);
  throw ImageError("The URL must be either a HTTP, data or file URL.");
}

}  // namespace fp4serve::vision
