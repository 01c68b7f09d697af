#include "tools/serve_transport_flags.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <stdexcept>
#include <vector>

namespace fp4serve::tools {

namespace {

// vLLM declares these list[str] and parses the flag with json.loads. A JSON string would reach
// Starlette as a str, where `origin in allow_origins` becomes a substring test: refused here
// rather than reproduced.
std::vector<std::string> json_string_list(const char* flag, const std::string& text) {
  const auto value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto refuse = [&] {
    return std::runtime_error(std::string(flag) + " must be a JSON list of strings, e.g. '[\"https://example.com\"]' or " +
                              "'[\"*\"]'; got '" + text + "'");
  };
  if (!value.is_array()) throw refuse();
  std::vector<std::string> out;
  for (const auto& item : value) {
    if (!item.is_string()) throw refuse();
    out.push_back(item.get<std::string>());
  }
  return out;
}

}  // namespace

// vLLM's boolean frontend flags are argparse BooleanOptionalActions: each has a --no- twin.
void add_transport_flags(CLI::App& cmd, TransportFlags& f) {
  const std::string tls = "TLS (vLLM's --ssl-* flags)";
  cmd.add_option("--ssl-certfile", f.ssl_certfile, "PEM certificate chain: serve https (may also hold the key)")->group(tls);
  cmd.add_option("--ssl-keyfile", f.ssl_keyfile, "PEM private key (unencrypted) for --ssl-certfile")->group(tls);
  cmd.add_option("--ssl-ca-certs", f.ssl_ca_certs, "PEM CA bundle that client certificates are verified against")
      ->group(tls);
  cmd.add_option("--ssl-cert-reqs", f.ssl_cert_reqs,
                 "client certificates: 0 not asked (default), 1 optional, 2 required (Python's ssl.CERT_*)")
      ->group(tls);
  cmd.add_option("--ssl-ciphers", f.ssl_ciphers, "OpenSSL cipher list for TLS 1.2 (default: OpenSSL's)")->group(tls);
  cmd.add_flag("--enable-ssl-refresh,!--no-enable-ssl-refresh", f.enable_ssl_refresh,
               "reload the certificate, key and CA files when they change (new connections use them)")
      ->group(tls);
  const std::string cors = "CORS (vLLM's defaults: any origin, method and header)";
  cmd.add_option("--allowed-origins", f.allowed_origins, "JSON list, e.g. '[\"https://app.example\"]'")->group(cors);
  cmd.add_option("--allowed-methods", f.allowed_methods, "JSON list, e.g. '[\"GET\", \"POST\"]'")->group(cors);
  cmd.add_option("--allowed-headers", f.allowed_headers, "JSON list, e.g. '[\"Authorization\"]'")->group(cors);
  cmd.add_flag("--allow-credentials,!--no-allow-credentials", f.allow_credentials,
               "access-control-allow-credentials: true (cookies and auth headers cross-origin)")
      ->group(cors);
  cmd.add_option("--root-path", f.root_path,
                 "path prefix of a proxy in front (FastAPI root_path): /PREFIX/v1/... and /v1/... both answer");
  cmd.add_option("--uds", f.uds, "listen on this Unix domain socket path instead of --host/--port");
}

TransportSettings resolve_transport_flags(const TransportFlags& f) {
  TransportSettings s;
  s.tls.certfile = f.ssl_certfile;
  s.tls.keyfile = f.ssl_keyfile;
  s.tls.ca_certs = f.ssl_ca_certs;
  s.tls.cert_reqs = f.ssl_cert_reqs;
  s.tls.ciphers = f.ssl_ciphers;
  s.tls.refresh = f.enable_ssl_refresh;
  http::validate_tls_settings(s.tls);
  s.cors.allowed_origins = json_string_list("--allowed-origins", f.allowed_origins);
  s.cors.allowed_methods = json_string_list("--allowed-methods", f.allowed_methods);
  s.cors.allowed_headers = json_string_list("--allowed-headers", f.allowed_headers);
  s.cors.allow_credentials = f.allow_credentials;
  s.root_path = f.root_path;
  s.uds = f.uds;
  return s;
}

}  // namespace fp4serve::tools
