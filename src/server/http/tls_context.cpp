#include "server/http/tls_context.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace fp4serve::http {

namespace {

namespace ssl = boost::asio::ssl;

std::string quoted(const std::string& path) { return "'" + path + "'"; }

// Checked before OpenSSL sees the file: its own message for a missing file is "system lib".
void require_readable_file(const char* flag, const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    throw TlsConfigError(std::string(flag) + " " + quoted(path) + ": no such file");
  }
  if (std::filesystem::is_directory(status)) {
    throw TlsConfigError(std::string(flag) + " " + quoted(path) + ": is a directory, not a PEM file");
  }
  if (::access(path.c_str(), R_OK) != 0) {
    throw TlsConfigError(std::string(flag) + " " + quoted(path) + ": cannot be read: " + std::strerror(errno));
  }
}

// "no start line (PEM routines)", from the error Asio took off OpenSSL's queue.
std::string openssl_reason(const boost::system::error_code& ec) { return ec.message(); }

bool file_mentions(const std::string& path, const std::string& needle) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.find(needle) != std::string::npos;
}

ssl::verify_mode verify_mode_for(int cert_reqs) {
  switch (cert_reqs) {
    case 0:  // ssl.CERT_NONE: no client certificate is asked for
      return ssl::verify_none;
    case 1:  // ssl.CERT_OPTIONAL: asked for, verified when sent
      return ssl::verify_peer;
    case 2:  // ssl.CERT_REQUIRED: the handshake fails without a valid one
      return ssl::verify_peer | ssl::verify_fail_if_no_peer_cert;
    default:
      throw TlsConfigError("--ssl-cert-reqs " + std::to_string(cert_reqs) +
                           ": must be 0 (ssl.CERT_NONE), 1 (ssl.CERT_OPTIONAL) or 2 (ssl.CERT_REQUIRED)");
  }
}

void load_certificate_chain(TlsContext& ctx, const std::string& certfile) {
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(certfile, ec);
  if (ec) {
    throw TlsConfigError("--ssl-certfile " + quoted(certfile) +
                         ": not a PEM certificate chain (OpenSSL: " + openssl_reason(ec) + ")");
  }
}

// `keyfile` empty: the key is in the certfile, as uvicorn's load_cert_chain(certfile, None) reads it.
void load_private_key(TlsContext& ctx, const std::string& keyfile, const std::string& certfile) {
  const bool in_certfile = keyfile.empty();
  const std::string& path = in_certfile ? certfile : keyfile;
  const std::string flag = in_certfile ? "--ssl-certfile " : "--ssl-keyfile ";
  boost::system::error_code ec;
  ctx.use_private_key_file(path, ssl::context::pem, ec);
  if (ec) {
    const std::string reason = openssl_reason(ec);
    if (reason.find("mismatch") != std::string::npos) {
      throw TlsConfigError(flag + quoted(path) + ": the private key does not match the certificate in --ssl-certfile " +
                           quoted(certfile));
    }
    if (file_mentions(path, "ENCRYPTED")) {
      throw TlsConfigError(flag + quoted(path) +
                           ": the private key is encrypted; serve takes no passphrase (vLLM has no "
                           "--ssl-keyfile-password): store it decrypted, e.g. `openssl pkey -in KEY -out KEY.plain`");
    }
    throw TlsConfigError(flag + quoted(path) +
                         (in_certfile ? ": no PEM private key in it (give --ssl-keyfile)" : ": not a PEM private key") +
                         " (OpenSSL: " + reason + ")");
  }
  // Keys of another type than the certificate's are not compared while loading; this catches them.
  if (::SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
    ::ERR_clear_error();
    throw TlsConfigError(flag + quoted(path) + ": the private key does not match the certificate in --ssl-certfile " +
                         quoted(certfile));
  }
}

void load_client_ca(TlsContext& ctx, const std::string& ca_certs) {
  boost::system::error_code ec;
  ctx.load_verify_file(ca_certs, ec);
  if (ec) {
    throw TlsConfigError("--ssl-ca-certs " + quoted(ca_certs) + ": not a PEM CA bundle (OpenSSL: " +
                         openssl_reason(ec) + ")");
  }
}

}  // namespace

std::shared_ptr<TlsContext> make_tls_context(const TlsSettings& settings) {
  const ssl::verify_mode verify = verify_mode_for(settings.cert_reqs);
  if (settings.certfile.empty()) {
    // uvicorn: `assert self.ssl_certfile` as soon as --ssl-keyfile is given alone.
    throw TlsConfigError("--ssl-keyfile " + quoted(settings.keyfile) + " needs --ssl-certfile (the certificate chain)");
  }
  require_readable_file("--ssl-certfile", settings.certfile);
  if (!settings.keyfile.empty()) require_readable_file("--ssl-keyfile", settings.keyfile);
  if (!settings.ca_certs.empty()) require_readable_file("--ssl-ca-certs", settings.ca_certs);

  auto ctx = std::make_shared<TlsContext>(TlsContext::tls_server);
  ctx->set_options(TlsContext::default_workarounds | TlsContext::no_sslv2 | TlsContext::no_sslv3 |
                   TlsContext::no_compression | TlsContext::single_dh_use);
  SSL_CTX* native = ctx->native_handle();
  // Python's PROTOCOL_TLS_SERVER minimum since 3.10; client-initiated renegotiation only costs CPU.
  ::SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  ::SSL_CTX_set_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  // Resumed sessions of verified clients fail without one ("session id context uninitialized");
  // Python's ssl module sets one for the same reason.
  static constexpr unsigned char kSessionContext[] = "fp4serve";
  ::SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1);
  // OpenSSL's default is to prompt on the terminal for an encrypted key: a server must not block there.
  ctx->set_password_callback([](std::size_t, TlsContext::password_purpose) { return std::string(); });

  load_certificate_chain(*ctx, settings.certfile);
  load_private_key(*ctx, settings.keyfile, settings.certfile);
  if (!settings.ca_certs.empty()) load_client_ca(*ctx, settings.ca_certs);
  ctx->set_verify_mode(verify);
  if (!settings.ciphers.empty() && ::SSL_CTX_set_cipher_list(native, settings.ciphers.c_str()) != 1) {
    ::ERR_clear_error();
    throw TlsConfigError("--ssl-ciphers " + quoted(settings.ciphers) + ": OpenSSL knows no cipher in this list");
  }
  return ctx;
}

void validate_tls_settings(const TlsSettings& settings) {
  if (settings.enabled()) make_tls_context(settings);
}

}  // namespace fp4serve::http
