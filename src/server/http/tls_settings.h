// vLLM's TLS flags, as `vllm serve` hands them to uvicorn (docs/vllm-surface.md §2.1):
//   --ssl-certfile   PEM certificate chain (may also hold the private key)
//   --ssl-keyfile    PEM private key (optional when the certfile holds it)
//   --ssl-ca-certs   PEM CA bundle that client certificates are verified against
//   --ssl-cert-reqs  Python's ssl.VerifyMode: 0 CERT_NONE (default), 1 CERT_OPTIONAL (a client
//                    certificate is asked for and verified when sent), 2 CERT_REQUIRED
//   --ssl-ciphers    OpenSSL cipher list for TLS 1.2 (TLS 1.3 suites are not affected)
//   --enable-ssl-refresh  reload the files when they change (tls_context_source.h)
// Plain data, no Asio/OpenSSL types: serve's flag code and HttpServerConfig include it cheaply.
#pragma once

#include <stdexcept>
#include <string>

namespace fp4serve::http {

struct TlsSettings {
  std::string certfile;
  std::string keyfile;
  std::string ca_certs;
  int cert_reqs = 0;
  std::string ciphers;
  bool refresh = false;

  // uvicorn's Config.is_ssl: either file turns TLS on (a keyfile alone is then refused, as uvicorn
  // asserts a certfile).
  bool enabled() const { return !certfile.empty() || !keyfile.empty(); }
};

// A TLS setting that cannot be served: a missing or unreadable file, a file that is not PEM, a key
// that does not match the certificate, a bad --ssl-cert-reqs or --ssl-ciphers. The message names
// the flag and the file.
class TlsConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds (and discards) the TLS context the server would use: serve calls it before the model
// loads so that a bad certificate costs no load time. Throws TlsConfigError; no-op when TLS is off.
void validate_tls_settings(const TlsSettings& settings);

}  // namespace fp4serve::http
