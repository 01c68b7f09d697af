// TLS (vLLM's --ssl-* flags): what a bad certificate, key or setting is refused with (the flag and
// the file named, no passphrase prompt), and HTTPS through the server: a plain request, client
// certificates under --ssl-cert-reqs 1 and 2, the handshake under the request-head deadline, and
// --enable-ssl-refresh's reload. Certificates are made at test time (tls_test_support.h).
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/local/stream_protocol.hpp>

#include "http_test_support.h"
#include "server/http/tls_context.h"
#include "server/http/tls_context_source.h"
#include "tls_test_support.h"

namespace fp4serve::http {
namespace {

using testing::RawClient;
using testing::TlsClient;
using testing::TlsFiles;
using testing::test_config;
using testing::text_response;

TlsSettings settings_for(const TlsFiles& f) {
  TlsSettings s;
  s.certfile = f.server_cert;
  s.keyfile = f.server_key;
  return s;
}

// The message make_tls_context refuses `s` with ("" when it loads).
std::string refusal(const TlsSettings& s) {
  try {
    make_tls_context(s);
    return "";
  } catch (const TlsConfigError& e) {
    return e.what();
  }
}

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(TlsContext, AGoodCertificateAndKeyLoad) {
  TlsFiles f("good");
  EXPECT_EQ(refusal(settings_for(f)), "");
  // The key may sit in the certfile (uvicorn's load_cert_chain(certfile, None)).
  const std::string both = f.path("both.pem");
  write_file(both, read_file(f.server_key) + read_file(f.server_cert));
  TlsSettings combined;
  combined.certfile = both;
  EXPECT_EQ(refusal(combined), "");
  TlsSettings verified = settings_for(f);
  verified.ca_certs = f.ca;
  verified.cert_reqs = 2;
  verified.ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256";
  EXPECT_EQ(refusal(verified), "");
}

TEST(TlsContext, MissingOrUnusableFilesAreRefusedWithTheFlagAndFileNamed) {
  TlsFiles f("missing");
  TlsSettings s = settings_for(f);
  s.certfile = f.path("nope.pem");
  std::string why = refusal(s);
  EXPECT_NE(why.find("--ssl-certfile"), std::string::npos) << why;
  EXPECT_NE(why.find(s.certfile), std::string::npos) << why;
  EXPECT_NE(why.find("no such file"), std::string::npos) << why;

  s = settings_for(f);
  s.keyfile = f.path("nope.key");
  why = refusal(s);
  EXPECT_NE(why.find("--ssl-keyfile '" + s.keyfile + "'"), std::string::npos) << why;

  s = settings_for(f);
  s.certfile = f.dir.string();
  EXPECT_NE(refusal(s).find("is a directory"), std::string::npos);

  s = settings_for(f);
  s.ca_certs = f.path("nope-ca.pem");
  EXPECT_NE(refusal(s).find("--ssl-ca-certs '" + s.ca_certs + "': no such file"), std::string::npos);
}

TEST(TlsContext, GarbagePemIsRefusedNamingTheFile) {
  TlsFiles f("garbage");
  const std::string junk = f.path("junk.pem");
  write_file(junk, "this is not PEM\n");
  TlsSettings s = settings_for(f);
  s.certfile = junk;
  std::string why = refusal(s);
  EXPECT_NE(why.find("--ssl-certfile '" + junk + "': not a PEM certificate chain"), std::string::npos) << why;

  s = settings_for(f);
  s.keyfile = junk;
  why = refusal(s);
  EXPECT_NE(why.find("--ssl-keyfile '" + junk + "': not a PEM private key"), std::string::npos) << why;

  // A certificate where the key should be.
  s = settings_for(f);
  s.keyfile = f.server_cert;
  EXPECT_NE(refusal(s).find("--ssl-keyfile '" + f.server_cert + "'"), std::string::npos);

  s = settings_for(f);
  s.ca_certs = junk;
  why = refusal(s);
  EXPECT_NE(why.find("--ssl-ca-certs '" + junk + "'"), std::string::npos) << why;

  // A certfile without a key in it, and no --ssl-keyfile.
  s = settings_for(f);
  s.keyfile.clear();
  why = refusal(s);
  EXPECT_NE(why.find("--ssl-certfile '" + f.server_cert + "': no PEM private key in it"), std::string::npos) << why;
}

TEST(TlsContext, AKeyOfAnotherCertificateIsRefused) {
  TlsFiles f("mismatch");
  TlsSettings s = settings_for(f);
  s.keyfile = f.other_key;
  const std::string why = refusal(s);
  EXPECT_NE(why.find("--ssl-keyfile '" + f.other_key + "'"), std::string::npos) << why;
  EXPECT_NE(why.find("does not match the certificate in --ssl-certfile '" + f.server_cert + "'"), std::string::npos)
      << why;
}

TEST(TlsContext, AnEncryptedKeyIsRefusedWithoutPromptingForAPassphrase) {
  TlsFiles f("encrypted");
  const std::string locked = f.path("locked.key");
  testing::Key key = testing::make_key();
  testing::write_key(locked, key.get(), "secret");
  testing::write_cert(f.path("locked.pem"),
                      testing::make_cert("localhost", key.get(), nullptr, nullptr, false).get());
  TlsSettings s;
  s.certfile = f.path("locked.pem");
  s.keyfile = locked;
  const std::string why = refusal(s);  // would block on the terminal without the password callback
  EXPECT_NE(why.find("--ssl-keyfile '" + locked + "': the private key is encrypted"), std::string::npos) << why;
  EXPECT_NE(why.find("--ssl-keyfile-password"), std::string::npos);
}

TEST(TlsContext, BadSettingsAreRefused) {
  TlsFiles f("settings");
  TlsSettings s = settings_for(f);
  s.cert_reqs = 3;
  EXPECT_NE(refusal(s).find("--ssl-cert-reqs 3: must be 0 (ssl.CERT_NONE), 1 (ssl.CERT_OPTIONAL) or 2"),
            std::string::npos);
  s = settings_for(f);
  s.ciphers = "NO-SUCH-CIPHER";
  EXPECT_NE(refusal(s).find("--ssl-ciphers 'NO-SUCH-CIPHER'"), std::string::npos);
  TlsSettings key_only;
  key_only.keyfile = f.server_key;
  EXPECT_TRUE(key_only.enabled());
  EXPECT_NE(refusal(key_only).find("needs --ssl-certfile"), std::string::npos);
  // Without TLS nothing is looked at (vLLM hands uvicorn no SSL settings then).
  TlsSettings off;
  off.ca_certs = f.path("nope.pem");
  off.cert_reqs = 7;
  EXPECT_FALSE(off.enabled());
  EXPECT_NO_THROW(validate_tls_settings(off));
  // The server refuses at construction, before binding.
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.tls.keyfile = f.other_key;
  EXPECT_THROW(HttpServer(cfg, Router()), TlsConfigError);
}

// ---------------------------------------------------------------- over the wire

Router tls_router() {
  Router router;
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, "healthy")); });
  return router;
}

// True when a TLS client with (cert, key) got a 200 (false when its handshake or request failed).
bool served(unsigned short port, const TlsFiles& f, const std::string& cert = {}, const std::string& key = {}) {
  try {
    TlsClient client(port, f.ca, cert, key);
    const std::string response = client.get("/health");
    return response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 && response.find("healthy") != std::string::npos;
  } catch (const std::exception&) {
    return false;
  }
}

TEST(HttpServerTls, AnswersOverHttpsAndNotOverPlainHttp) {
  TlsFiles f("serve");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.request_head_timeout = std::chrono::milliseconds(300);
  HttpServer server(cfg, tls_router());
  server.start();
  EXPECT_EQ(server.listen_address(), "https://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_TRUE(served(server.port(), f));
  // A plain HTTP request is a failed handshake: the connection closes without an answer.
  RawClient plain(server.port());
  plain.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(plain.read_to_eof().find("HTTP/1.1"), std::string::npos);
  EXPECT_TRUE(served(server.port(), f));  // and the server still serves
}

TEST(HttpServerTls, AClientThatNeverHandshakesIsClosedAtTheHeadDeadline) {
  TlsFiles f("deadline");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.request_head_timeout = std::chrono::milliseconds(300);
  HttpServer server(cfg, tls_router());
  server.start();
  RawClient silent(server.port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(silent.at_eof());  // blocks until the server closes
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(250));
  EXPECT_LT(waited, std::chrono::seconds(5));
  // The slot is given back (the close unregisters just after the socket closes).
  EXPECT_EQ(testing::open_connections_after(server, std::chrono::seconds(2)), 0u);
}

TEST(HttpServerTls, RequiredClientCertificatesMustBeSignedByTheCa) {
  TlsFiles f("mtls");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.tls.ca_certs = f.ca;
  cfg.tls.cert_reqs = 2;
  HttpServer server(cfg, tls_router());
  server.start();
  EXPECT_TRUE(served(server.port(), f, f.client_cert, f.client_key));
  EXPECT_FALSE(served(server.port(), f));                                    // no certificate
  EXPECT_FALSE(served(server.port(), f, f.stranger_cert, f.stranger_key));  // one the CA did not sign
}

TEST(HttpServerTls, OptionalClientCertificatesAreVerifiedOnlyWhenSent) {
  TlsFiles f("optional");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.tls.ca_certs = f.ca;
  cfg.tls.cert_reqs = 1;
  HttpServer server(cfg, tls_router());
  server.start();
  EXPECT_TRUE(served(server.port(), f));
  EXPECT_TRUE(served(server.port(), f, f.client_cert, f.client_key));
  EXPECT_FALSE(served(server.port(), f, f.stranger_cert, f.stranger_key));
}

TEST(HttpServerTls, TimeoutsWorkInsideTheSession) {
  TlsFiles f("timeouts");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.keep_alive_timeout = std::chrono::milliseconds(200);
  cfg.request_head_timeout = std::chrono::milliseconds(300);
  HttpServer server(cfg, tls_router());
  server.start();
  {
    // An idle keep-alive connection is ended (close_notify) after the keep-alive timeout.
    TlsClient client(server.port(), f.ca);
    client.send("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n");
    const auto start = std::chrono::steady_clock::now();
    const std::string all = client.read_until_close();
    EXPECT_EQ(all.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << all;
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  }
  {
    // A head that stops halfway gets its 408 through the TLS session.
    TlsClient client(server.port(), f.ca);
    client.send("GET /health HTTP/1.1\r\nHost: loc");
    const std::string all = client.read_until_close();
    EXPECT_EQ(all.rfind("HTTP/1.1 408 Request Timeout\r\n", 0), 0u) << all;
    EXPECT_NE(all.find("Timed out reading the request head"), std::string::npos);
  }
  EXPECT_EQ(testing::open_connections_after(server, std::chrono::seconds(3)), 0u);
}

TEST(HttpServerTls, RefreshServesChangedCertificatesToNewConnections) {
  TlsFiles f("refresh");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.tls.refresh = true;
  std::vector<std::string> infos;
  std::mutex mu;
  cfg.info_log = [&](const std::string& m) {
    std::lock_guard lock(mu);
    infos.push_back(m);
  };
  HttpServer server(cfg, tls_router());
  server.start();
  TlsClient before(server.port(), f.ca);
  EXPECT_EQ(before.peer_common_name(), "localhost");

  // A renewed certificate from another CA, which only the new connection trusts (so it cannot
  // succeed before the reload); the key is replaced first, then the certificate, as a deploy would.
  testing::Key new_ca_key = testing::make_key();
  testing::Cert new_ca = testing::make_cert("refresh CA", new_ca_key.get(), nullptr, nullptr, true);
  const std::string new_ca_file = f.path("new-ca.pem");
  testing::write_cert(new_ca_file, new_ca.get());
  testing::Key key = testing::make_key();
  testing::write_key(f.server_key, key.get());
  testing::write_cert(f.server_cert, testing::make_cert("renewed", key.get(), new_ca.get(), new_ca_key.get(), false).get());

  std::string name;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      TlsClient after(server.port(), new_ca_file);
      name = after.peer_common_name();
      EXPECT_NE(after.get("/health").find("healthy"), std::string::npos);
      break;
    } catch (const std::exception&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // not reloaded yet
    }
  }
  EXPECT_EQ(name, "renewed");
  EXPECT_NE(before.get("/health").find("healthy"), std::string::npos);  // the old session keeps working
  std::lock_guard lock(mu);
  ASSERT_FALSE(infos.empty());
  EXPECT_NE(infos.back().find("reloaded"), std::string::npos);
}

TEST(HttpServerTls, ServesOverAUnixSocketToo) {
  TlsFiles f("uds");
  HttpServerConfig cfg = test_config();
  cfg.tls = settings_for(f);
  cfg.uds = f.path("tls.sock");
  HttpServer server(cfg, tls_router());
  server.start();
  namespace net = boost::asio;
  net::io_context io;
  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.load_verify_file(f.ca);
  ctx.set_verify_mode(net::ssl::verify_peer);
  net::ssl::stream<net::local::stream_protocol::socket> stream(io, ctx);
  stream.next_layer().connect(net::local::stream_protocol::endpoint(cfg.uds));
  stream.handshake(net::ssl::stream_base::client);
  const std::string req = "GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  net::write(stream, net::buffer(req));
  std::string out;
  char buf[1024];
  boost::system::error_code ec;
  while (!ec) out.append(buf, stream.read_some(net::buffer(buf), ec));
  EXPECT_EQ(out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << out;
}

TEST(TlsContextSource, ReloadsChangedFilesAndKeepsTheOldContextWhenTheNewOnesFail) {
  TlsFiles f("reload");
  TlsContextSource source(settings_for(f));
  const auto first = source.current();
  EXPECT_FALSE(source.reload_if_changed().changed);
  EXPECT_EQ(source.current(), first);

  // A key written before its certificate: the pair does not match yet.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  testing::Key fresh = testing::make_key();
  testing::write_key(f.server_key, fresh.get());
  TlsContextSource::Reload failed = source.reload_if_changed();
  EXPECT_TRUE(failed.changed);
  EXPECT_NE(failed.error.find("does not match"), std::string::npos) << failed.error;
  EXPECT_EQ(source.current(), first);

  testing::write_cert(f.server_cert, testing::make_cert("localhost", fresh.get(), nullptr, nullptr, false).get());
  TlsContextSource::Reload ok = source.reload_if_changed();
  EXPECT_TRUE(ok.changed);
  EXPECT_EQ(ok.error, "");
  EXPECT_NE(source.current(), first);
}

}  // namespace
}  // namespace fp4serve::http
