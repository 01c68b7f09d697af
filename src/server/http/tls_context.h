// The OpenSSL server context built from vLLM's TLS flags (tls_settings.h), with the choices uvicorn's
// create_ssl_context makes on Python's ssl.PROTOCOL_TLS_SERVER: TLS 1.2 and newer, OpenSSL's
// default ciphers unless --ssl-ciphers, the certificate chain and key loaded once, client
// verification from --ssl-cert-reqs against --ssl-ca-certs. Every failure is a TlsConfigError that
// names the flag and the file (vLLM prints a Python traceback ending in "[SSL] PEM lib", after the
// engine has started).
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "server/http/tls_settings.h"

namespace fp4serve::http {

using TlsContext = boost::asio::ssl::context;

// Requires settings.enabled(). Never prompts for a passphrase (an encrypted key is refused: vLLM
// has no --ssl-keyfile-password, see docs/vllm-surface.md §2.1).
std::shared_ptr<TlsContext> make_tls_context(const TlsSettings& settings);

}  // namespace fp4serve::http
