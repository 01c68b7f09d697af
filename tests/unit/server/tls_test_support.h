// Test-only TLS material made at test time with OpenSSL's API (no files in the repository, nothing
// that expires): EC P-256 keys, a CA, certificates it signs, and a blocking TLS client for the
// http_tls_test.cpp suite.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

namespace fp4serve::http::testing {

struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct CertDeleter {
  void operator()(X509* c) const { X509_free(c); }
};
using Key = std::unique_ptr<EVP_PKEY, KeyDeleter>;
using Cert = std::unique_ptr<X509, CertDeleter>;

inline Key make_key() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) throw std::runtime_error("EVP_EC_gen failed");
  return key;
}

inline void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) throw std::runtime_error("bad X509 extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

// Signed by (issuer, issuer_key), or self-signed when issuer is null. `is_ca` makes a CA; else a
// leaf valid for 127.0.0.1 and localhost.
inline Cert make_cert(const std::string& common_name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool is_ca) {
  static long serial = 1;
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial++);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  if (is_ca) {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "CA:FALSE");
    add_extension(cert.get(), signer, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  }
  X509_sign(cert.get(), issuer_key ? issuer_key : key, EVP_sha256());
  return cert;
}

inline void write_key(const std::string& path, EVP_PKEY* key, const char* passphrase = nullptr) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  if (passphrase) {
    PEM_write_PrivateKey(f, key, EVP_aes_256_cbc(), reinterpret_cast<const unsigned char*>(passphrase),
                         static_cast<int>(std::strlen(passphrase)), nullptr, nullptr);
  } else {
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
  }
  std::fclose(f);
}

inline void write_cert(const std::string& path, X509* cert, bool append = false) {
  FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  PEM_write_X509(f, cert);
  std::fclose(f);
}

// A directory of PEM files: ca.pem; server.pem + server.key (signed by the CA); client.pem +
// client.key (signed by the CA); other.key (matches nothing); stranger.pem + stranger.key (a
// self-signed client the CA does not know).
struct TlsFiles {
  std::filesystem::path dir;
  std::string ca, server_cert, server_key, client_cert, client_key, other_key, stranger_cert, stranger_key;

  explicit TlsFiles(const std::string& name) {
    dir = std::filesystem::temp_directory_path() / ("fp4serve-tls-" + std::to_string(::getpid()) + "-" + name);
    std::filesystem::create_directories(dir);
    auto at = [&](const char* f) { return (dir / f).string(); };
    ca = at("ca.pem");
    server_cert = at("server.pem");
    server_key = at("server.key");
    client_cert = at("client.pem");
    client_key = at("client.key");
    other_key = at("other.key");
    stranger_cert = at("stranger.pem");
    stranger_key = at("stranger.key");
    Key ca_key = make_key();
    Cert ca_cert = make_cert("fp4serve test CA", ca_key.get(), nullptr, nullptr, true);
    write_cert(ca, ca_cert.get());
    Key sk = make_key();
    write_key(server_key, sk.get());
    write_cert(server_cert, make_cert("localhost", sk.get(), ca_cert.get(), ca_key.get(), false).get());
    Key ck = make_key();
    write_key(client_key, ck.get());
    write_cert(client_cert, make_cert("client", ck.get(), ca_cert.get(), ca_key.get(), false).get());
    write_key(other_key, make_key().get());
    Key xk = make_key();
    write_key(stranger_key, xk.get());
    write_cert(stranger_cert, make_cert("stranger", xk.get(), nullptr, nullptr, false).get());
  }
  ~TlsFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string path(const char* name) const { return (dir / name).string(); }
};

// One HTTPS exchange with `Connection: close`; throws on a failed handshake.
class TlsClient {
 public:
  TlsClient(unsigned short port, const std::string& ca_file, const std::string& cert = {}, const std::string& key = {})
      : ctx_(boost::asio::ssl::context::tls_client) {
    ctx_.load_verify_file(ca_file);
    ctx_.set_verify_mode(boost::asio::ssl::verify_peer);
    if (!cert.empty()) {
      ctx_.use_certificate_chain_file(cert);
      ctx_.use_private_key_file(key, boost::asio::ssl::context::pem);
    }
    // After the context is complete: an SSL object copies the certificate when it is created.
    stream_.emplace(io_, ctx_);
    stream_->next_layer().connect({boost::asio::ip::make_address("127.0.0.1"), port});
    stream_->handshake(boost::asio::ssl::stream_base::client);
  }

  // The whole response as received (head and body), read until the server closes.
  std::string get(const std::string& target) {
    send("GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    return read_until_close();
  }

  void send(const std::string& bytes) { boost::asio::write(*stream_, boost::asio::buffer(bytes)); }

  // Everything until the server ends the connection (close_notify or EOF).
  std::string read_until_close() {
    std::string out;
    char buf[4096];
    for (;;) {
      boost::system::error_code ec;
      std::size_t n = stream_->read_some(boost::asio::buffer(buf), ec);
      out.append(buf, n);
      if (ec) break;
    }
    return out;
  }

  // The CN of the certificate the server presented.
  std::string peer_common_name() {
    X509* cert = SSL_get1_peer_certificate(stream_->native_handle());
    if (!cert) return {};
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
    X509_free(cert);
    return cn;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ssl::context ctx_;
  std::optional<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> stream_;
};

}  // namespace fp4serve::http::testing
