#include "server/http/cors_policy.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace fp4serve::http {

namespace {

// Starlette's ALL_METHODS and SAFELISTED_HEADERS.
constexpr const char* kAllMethods[] = {"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"};
constexpr const char* kSafelistedHeaders[] = {"Accept", "Accept-Language", "Content-Language", "Content-Type"};
constexpr int kMaxAgeSeconds = 600;

bool contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Python's str.strip() on a latin-1 decoded header value: ASCII whitespace, the separators
// 0x1c-0x1f, NEL (0x85) and NBSP (0xa0).
bool python_space(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u == ' ' || (u >= 0x09 && u <= 0x0d) || (u >= 0x1c && u <= 0x1f) || u == 0x85 || u == 0xa0;
}

std::string_view python_strip(std::string_view s) {
  while (!s.empty() && python_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && python_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

void set_header(std::vector<Header>& headers, const std::string& name, const std::string& value) {
  auto first = std::find_if(headers.begin(), headers.end(),
                            [&](const Header& h) { return field_name_equals(h.name, name); });
  if (first == headers.end()) {
    headers.push_back(Header{name, value});
    return;
  }
  first->name = name;
  first->value = value;
  headers.erase(std::remove_if(std::next(first), headers.end(),
                               [&](const Header& h) { return field_name_equals(h.name, name); }),
                headers.end());
}

CorsPolicy::CorsPolicy(const CorsSettings& settings)
    : allow_origins_(settings.allowed_origins),
      allow_methods_(settings.allowed_methods),
      allow_all_origins_(contains(settings.allowed_origins, "*")),
      allow_all_headers_(contains(settings.allowed_headers, "*")),
      allow_credentials_(settings.allow_credentials),
      preflight_explicit_allow_origin_(!allow_all_origins_ || settings.allow_credentials) {
  if (contains(allow_methods_, "*")) allow_methods_.assign(std::begin(kAllMethods), std::end(kAllMethods));

  // Header names as Starlette writes them: lower case on the wire.
  if (allow_all_origins_) simple_headers_.push_back({"access-control-allow-origin", "*"});
  if (allow_credentials_) simple_headers_.push_back({"access-control-allow-credentials", "true"});

  if (preflight_explicit_allow_origin_) {
    preflight_headers_.push_back({"vary", "Origin"});  // the origin itself is echoed per request
  } else {
    preflight_headers_.push_back({"access-control-allow-origin", "*"});
  }
  preflight_headers_.push_back({"access-control-allow-methods", join(allow_methods_)});
  preflight_headers_.push_back({"access-control-max-age", std::to_string(kMaxAgeSeconds)});
  // sorted(SAFELISTED_HEADERS | set(allow_headers)): a set of exact strings in code-point order.
  std::set<std::string> allowed(std::begin(kSafelistedHeaders), std::end(kSafelistedHeaders));
  allowed.insert(settings.allowed_headers.begin(), settings.allowed_headers.end());
  std::vector<std::string> sorted(allowed.begin(), allowed.end());
  if (!allow_all_headers_) preflight_headers_.push_back({"access-control-allow-headers", join(sorted)});
  if (allow_credentials_) preflight_headers_.push_back({"access-control-allow-credentials", "true"});
  for (const std::string& h : sorted) allow_headers_lower_.push_back(ascii_lower(h));
}

bool CorsPolicy::applies(const HttpRequest& request) { return request.header("origin").has_value(); }

bool CorsPolicy::allows_origin(const std::string& origin) const {
  return allow_all_origins_ || contains(allow_origins_, origin);
}

std::optional<HttpResponse> CorsPolicy::preflight(const HttpRequest& request) const {
  const auto origin = request.header("origin");
  const auto method = request.header("access-control-request-method");
  if (!origin || request.method != "OPTIONS" || !method) return std::nullopt;
  const auto requested_headers = request.header("access-control-request-headers");

  std::vector<Header> headers = preflight_headers_;
  std::vector<std::string> failures;
  if (allows_origin(std::string(*origin))) {
    if (preflight_explicit_allow_origin_) set_header(headers, "access-control-allow-origin", std::string(*origin));
  } else {
    failures.push_back("origin");
  }
  if (!contains(allow_methods_, *method)) failures.push_back("method");
  if (allow_all_headers_ && requested_headers) {
    set_header(headers, "access-control-allow-headers", std::string(*requested_headers));
  } else if (requested_headers) {
    // Split on every comma (an empty item is a header name nobody allowed).
    std::string_view rest = *requested_headers;
    for (;;) {
      const std::size_t comma = rest.find(',');
      if (!contains(allow_headers_lower_, python_strip(ascii_lower(rest.substr(0, comma))))) {
        failures.push_back("headers");
        break;
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  HttpResponse response;
  response.content_type = "text/plain; charset=utf-8";
  response.headers = std::move(headers);
  if (failures.empty()) {
    response.status = 200;
    response.body = "OK";
  } else {
    response.status = 400;
    response.body = "Disallowed CORS " + join(failures);
  }
  return response;
}

void CorsPolicy::decorate(const HttpRequest& request, std::vector<Header>& response_headers) const {
  const auto origin = request.header("origin");
  if (!origin) return;
  for (const Header& h : simple_headers_) set_header(response_headers, h.name, h.value);
  const bool has_cookie = request.header("cookie").has_value();
  // Cookies need the origin itself instead of "*"; listed origins are always echoed.
  if ((allow_all_origins_ && has_cookie) || (!allow_all_origins_ && allows_origin(std::string(*origin)))) {
    set_header(response_headers, "access-control-allow-origin", std::string(*origin));
    std::string vary = "Origin";
    for (const Header& h : response_headers) {
      if (field_name_equals(h.name, "vary")) {
        vary = h.value + ", Origin";
        break;
      }
    }
    set_header(response_headers, "vary", vary);
  }
}

}  // namespace fp4serve::http
