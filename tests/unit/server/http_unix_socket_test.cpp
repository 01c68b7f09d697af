// --uds: the server on a Unix-domain socket path. A stale socket file is replaced, a live one or a
// regular file is refused, and the socket file goes away when the server stops.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <boost/asio/local/stream_protocol.hpp>
#include <unistd.h>

#include "http_test_support.h"

namespace fp4serve::http {
namespace {

namespace net = boost::asio;
using local = net::local::stream_protocol;
using testing::test_config;
using testing::text_response;

std::string socket_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("fp4serve-") + std::to_string(::getpid()) + "-" + name))
      .string();
}

Router health_router() {
  Router router;
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, "ok")); });
  return router;
}

std::string get_over_unix(const std::string& path) {
  net::io_context io;
  local::socket s(io);
  s.connect(local::endpoint(path));
  const std::string req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  net::write(s, net::buffer(req));
  std::string out;
  char buf[1024];
  boost::system::error_code ec;
  for (;;) {
    std::size_t n = s.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

TEST(HttpServerUnixSocket, ServesOnThePathAndRemovesItOnStop) {
  const std::string path = socket_path("serve.sock");
  std::filesystem::remove(path);
  HttpServerConfig cfg = test_config();
  cfg.uds = path;
  HttpServer server(cfg, health_router());
  server.start();
  EXPECT_EQ(server.port(), 0);
  EXPECT_EQ(server.listen_address(), "unix:" + path);
  const std::string response = get_over_unix(path);
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << response;
  EXPECT_NE(response.find("\r\n\r\nok"), std::string::npos);
  server.stop();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(HttpServerUnixSocket, AStaleSocketFileIsReplacedALiveOneOrAFileRefused) {
  const std::string path = socket_path("stale.sock");
  std::filesystem::remove(path);
  {
    // A socket file nobody listens on, as a killed server leaves it.
    net::io_context io;
    local::acceptor stale(io, local::endpoint(path));
  }
  ASSERT_TRUE(std::filesystem::exists(path));
  HttpServerConfig cfg = test_config();
  cfg.uds = path;
  HttpServer first(cfg, health_router());
  first.start();
  EXPECT_NE(get_over_unix(path).find("200 OK"), std::string::npos);

  HttpServer second(cfg, health_router());
  try {
    second.start();
    FAIL() << "a second server took a live socket";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("another server is listening"), std::string::npos) << e.what();
  }
  EXPECT_NE(get_over_unix(path).find("200 OK"), std::string::npos);  // the first one still serves
  first.stop();

  std::ofstream(path) << "not a socket";
  HttpServer third(cfg, health_router());
  try {
    third.start();
    FAIL() << "a regular file was replaced";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a socket"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  EXPECT_TRUE(std::filesystem::exists(path));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fp4serve::http
