// The HTTP server over real loopback sockets: keep-alive, routing errors, limits, malformed input,
// auth, timeouts, access log.
#include <gtest/gtest.h>

#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "http_test_support.h"

namespace fp4serve::http {
namespace {

using testing::RawClient;
using testing::test_config;
using testing::text_response;

Router echo_router() {
  Router router;
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, "")); });
  router.post("/echo", [](std::shared_ptr<Exchange> ex) {
    HttpResponse r = text_response(200, ex->request().body);
    r.headers.push_back({"x-path", ex->request().path});
    r.headers.push_back({"x-query", ex->request().query});
    ex->respond(std::move(r));
  });
  router.get("/v1/models", [](std::shared_ptr<Exchange> ex) {
    ex->respond(HttpResponse{200, "application/json", {}, R"({"object":"list","data":[]})"});
  });
  router.get("/throws", [](std::shared_ptr<Exchange>) -> void { throw std::runtime_error("boom"); });
  router.get("/later", [](std::shared_ptr<Exchange> ex) {
    // Answer from another thread, as the engine does.
    std::thread([ex] { ex->respond(text_response(202, "done later")); }).detach();
  });
  return router;
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  HttpServer server(test_config(), echo_router());
  server.start();
  ASSERT_NE(server.port(), 0);
  RawClient client(server.port());
  for (int i = 0; i < 5; ++i) {
    std::string body = "request number " + std::to_string(i);
    auto r = client.request("POST", "/echo?i=" + std::to_string(i), body,
                            "Content-Type: text/plain\r\n");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, body);
    EXPECT_EQ(r.header("x-path"), "/echo");
    EXPECT_EQ(r.header("x-query"), "i=" + std::to_string(i));
    EXPECT_EQ(r.header("connection"), "");
  }
  auto later = client.request("GET", "/later");
  EXPECT_EQ(later.status, 202);
  EXPECT_EQ(later.body, "done later");
  EXPECT_EQ(server.open_connections(), 1u);
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrder) {
  HttpServer server(test_config(), echo_router());
  server.start();
  RawClient client(server.port());
  client.send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\noneGET /health HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\ntwo\r\n0\r\n\r\n");
  auto a = client.read_response();
  auto b = client.read_response();
  auto c = client.read_response();
  EXPECT_EQ(a.body, "one");
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "");
  EXPECT_EQ(c.body, "two");
}

TEST(HttpServer, UnknownPathIs404AndWrongMethodIs405LikeFastApi) {
  HttpServer server(test_config(), echo_router());
  server.start();
  RawClient client(server.port());
  auto missing = client.request("GET", "/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.body, R"({"detail":"Not Found"})");
  EXPECT_EQ(missing.header("content-type"), "application/json");
  auto wrong = client.request("DELETE", "/echo");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.body, R"({"detail":"Method Not Allowed"})");
  EXPECT_EQ(wrong.header("allow"), "POST");
  // The connection survives both.
  EXPECT_EQ(client.request("GET", "/health").status, 200);
}

TEST(HttpServer, BodyOverLimitIs413) {
  auto cfg = test_config();
  cfg.max_body_bytes = 1024;
  HttpServer server(cfg, echo_router());
  server.start();
  {
    RawClient client(server.port());
    auto r = client.request("POST", "/echo", std::string(5000, 'x'));
    EXPECT_EQ(r.status, 413);
    auto j = nlohmann::json::parse(r.body);
    EXPECT_EQ(j["error"]["code"], 413);
    EXPECT_EQ(r.header("connection"), "close");
    EXPECT_TRUE(client.at_eof());
  }
  {
    // Chunked bodies are counted as they arrive.
    RawClient client(server.port());
    std::string chunk = std::string(600, 'y');
    client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n" + chunk +
                "\r\n258\r\n" + chunk + "\r\n0\r\n\r\n");
    EXPECT_EQ(client.read_response().status, 413);
  }
  {
    RawClient client(server.port());
    EXPECT_EQ(client.request("POST", "/echo", std::string(1024, 'z')).status, 200) << "limit is inclusive";
  }
}

TEST(HttpServer, HeadersOverLimitAre431) {
  auto cfg = test_config();
  cfg.max_header_bytes = 2048;
  HttpServer server(cfg, echo_router());
  server.start();
  RawClient client(server.port());
  auto r = client.request("GET", "/health", "", "X-Big: " + std::string(4000, 'h') + "\r\n");
  EXPECT_EQ(r.status, 431);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "Request Header Fields Too Large");
}

TEST(HttpServer, MalformedRequestsGet400AndNeverStopTheServer) {
  HttpServer server(test_config(), echo_router());
  server.start();
  const std::vector<std::string> garbage = {
      "GARBAGE\r\n\r\n",
      "GET /health HTTP/1.1\r\nBad Header Without Colon\r\n\r\n",
      "GET /health HTTX/1.1\r\n\r\n",
      "POST /echo HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
      "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n",  // a TLS hello
  };
  for (const std::string& bytes : garbage) {
    RawClient client(server.port());
    client.send(bytes);
    auto r = client.read_response();
    EXPECT_EQ(r.status, 400) << bytes;
    EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "Bad Request");
    EXPECT_TRUE(client.at_eof());
  }
  RawClient client(server.port());
  EXPECT_EQ(client.request("GET", "/health").status, 200);
}

TEST(HttpServer, RandomBytesNeverCrashTheServer) {
  auto cfg = test_config();
  cfg.request_head_timeout = std::chrono::milliseconds(200);  // bytes that parse as a partial request
  cfg.request_body_timeout = std::chrono::milliseconds(200);
  cfg.keep_alive_timeout = std::chrono::milliseconds(200);  // or, by luck, as a whole one
  HttpServer server(cfg, echo_router());
  server.start();
  std::mt19937 rng(1234);
  const std::string prefixes[] = {"", "GET ", "POST /echo HTTP/1.1\r\n", "GET /health HTTP/1.1\r\nHost: x\r\n"};
  for (int i = 0; i < 100; ++i) {
    std::string bytes = prefixes[i % 4];
    std::size_t n = 1 + rng() % 300;
    for (std::size_t k = 0; k < n; ++k) bytes.push_back(static_cast<char>(rng() % 256));
    bytes += "\r\n\r\n";
    RawClient client(server.port());
    client.send(bytes);
    std::string reply = client.read_to_eof();  // whatever it says, the server ends the exchange
    if (!reply.empty()) {
      EXPECT_EQ(reply.rfind("HTTP/1.1 ", 0), 0u) << "case " << i;
    }
  }
  RawClient client(server.port());
  EXPECT_EQ(client.request("GET", "/health").status, 200);
}

TEST(HttpServer, ApiKeyGuardsV1PathsOnly) {
  auto cfg = test_config();
  cfg.api_keys = {"sk-test"};
  HttpServer server(cfg, echo_router());
  server.start();
  RawClient client(server.port());
  auto denied = client.request("GET", "/v1/models");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.body, R"({"error":"Unauthorized"})");
  EXPECT_EQ(client.request("GET", "/v1/models", "", "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(client.request("GET", "/v1/unknown").status, 401) << "auth runs before routing";
  auto ok = client.request("GET", "/v1/models", "", "Authorization: Bearer sk-test\r\n");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, R"({"object":"list","data":[]})");
  EXPECT_EQ(client.request("GET", "/v1/models", "", "authorization: bearer sk-test\r\n").status, 200);
  EXPECT_EQ(client.request("GET", "/health").status, 200);
  EXPECT_EQ(client.request("OPTIONS", "/v1/models").status, 405) << "OPTIONS skips auth";
}

TEST(HttpServer, HandlerExceptionBecomes500) {
  std::mutex mu;
  std::vector<std::string> errors;
  auto cfg = test_config();
  cfg.error_log = [&](const std::string& e) {
    std::lock_guard lock(mu);
    errors.push_back(e);
  };
  HttpServer server(cfg, echo_router());
  server.start();
  RawClient client(server.port());
  auto r = client.request("GET", "/throws");
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"]["type"], "Internal Server Error");
  std::lock_guard lock(mu);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("boom"), std::string::npos);
}

// RFC 9110 9.3.2: the answer to HEAD is the GET answer's head, Content-Length included, and no
// body. Each response is followed by a pipelined GET on the same connection: a stray body byte
// would be read as its status line.
TEST(HttpServer, HeadIsAnsweredWithoutABody) {
  Router router = echo_router();
  const std::string metrics = "# HELP x\nx 1\n";
  router.any("/metrics", [&](std::shared_ptr<Exchange> ex) { ex->respond(text_response(200, metrics)); });
  router.any("/stream", [](std::shared_ptr<Exchange> ex) {
    ex->start_stream();
    ex->write("data: 1\n\n");
    ex->finish("data: [DONE]\n\n");
  });
  HttpServer server(test_config(), std::move(router));
  server.start();
  RawClient client(server.port());
  struct Case {
    std::string target;
    int status;
    std::string content_length;
  };
  for (const Case& c : {Case{"/v1/models", 405, "31"}, Case{"/nope", 404, "22"},
                        Case{"/metrics", 200, std::to_string(metrics.size())}, Case{"/stream", 200, ""}}) {
    SCOPED_TRACE(c.target);
    auto head = client.request("HEAD", c.target);
    EXPECT_EQ(head.status, c.status);
    EXPECT_EQ(head.header("content-length"), c.content_length);
    EXPECT_TRUE(head.body.empty());
    auto next = client.request("GET", "/health");
    EXPECT_EQ(next.status, 200);
    EXPECT_EQ(next.body, "");
  }
  EXPECT_EQ(client.request("HEAD", "/v1/models").header("allow"), "GET");
  // The streamed answer to GET still has its body.
  auto streamed = client.request("GET", "/stream");
  EXPECT_EQ(streamed.body, "data: 1\n\ndata: [DONE]\n\n");
  EXPECT_EQ(client.request("POST", "/metrics").body, metrics);  // any method, as vLLM's Mount
}

TEST(HttpServer, ExpectContinueIsAnswered) {
  HttpServer server(test_config(), echo_router());
  server.start();
  RawClient client(server.port());
  client.send("POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  auto interim = client.read_response();
  EXPECT_EQ(interim.status, 100);
  client.send("hello");
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
}

TEST(HttpServer, Http10ClosesAfterResponse) {
  HttpServer server(test_config(), echo_router());
  server.start();
  RawClient client(server.port());
  client.send("GET /health HTTP/1.0\r\n\r\n");
  auto r = client.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(client.at_eof());
}

TEST(HttpServer, ConnectionCloseIsHonoured) {
  HttpServer server(test_config(), echo_router());
  server.start();
  RawClient client(server.port());
  auto r = client.request("GET", "/health", "", "Connection: close\r\n");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(client.at_eof());
}

TEST(HttpServer, IdleAndSlowRequestTimeouts) {
  auto cfg = test_config();
  cfg.keep_alive_timeout = std::chrono::milliseconds(50);
  cfg.request_head_timeout = std::chrono::milliseconds(50);
  cfg.request_body_timeout = std::chrono::milliseconds(50);
  HttpServer server(cfg, echo_router());
  server.start();
  {
    RawClient idle(server.port());
    EXPECT_TRUE(idle.at_eof()) << "an idle connection is closed by the server";
  }
  {
    RawClient slow(server.port());
    slow.send("GET /health HTTP/1.1\r\nHost:");  // never finished
    auto r = slow.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_NE(r.body.find("request head"), std::string::npos) << r.body;
    EXPECT_TRUE(slow.at_eof());
  }
  {
    RawClient slow_body(server.port());
    slow_body.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");  // 7 bytes short
    auto r = slow_body.read_response();
    EXPECT_EQ(r.status, 408);
    EXPECT_NE(r.body.find("request body"), std::string::npos) << r.body;
    EXPECT_TRUE(slow_body.at_eof());
  }
}

TEST(HttpServer, TricklingAHeadDoesNotExtendItsDeadline) {
  auto cfg = test_config();
  cfg.request_head_timeout = std::chrono::milliseconds(300);
  HttpServer server(cfg, echo_router());
  server.start();
  RawClient slow(server.port());
  const auto start = std::chrono::steady_clock::now();
  const std::string head = "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  std::size_t sent = 0;
  // One byte every 20 ms: far longer than the deadline in total, each byte well inside it.
  while (sent < head.size() && std::chrono::steady_clock::now() - start < std::chrono::seconds(2)) {
    try {
      slow.send(head.substr(sent++, 1));
    } catch (const std::exception&) {
      break;  // the server closed after its 408
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto r = slow.read_response();
  EXPECT_EQ(r.status, 408);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
}

TEST(HttpServer, AtTheCapTheOldestIdleConnectionMakesRoom) {
  auto cfg = test_config();
  cfg.max_connections = 2;
  HttpServer server(cfg, echo_router());
  server.start();
  RawClient first(server.port());
  RawClient second(server.port());
  EXPECT_EQ(second.request("GET", "/health").status, 200);
  RawClient third(server.port());  // evicts `first`, the oldest without a request in flight
  EXPECT_EQ(third.request("GET", "/health").status, 200);
  EXPECT_TRUE(first.at_eof());
  EXPECT_EQ(second.request("GET", "/health").status, 200);
  EXPECT_LE(server.open_connections(), 2u);
}

TEST(HttpServer, PastTheCapWithEveryConnectionBusyOnlyProbesAreAnswered) {
  auto cfg = test_config();
  cfg.max_connections = 1;
  Router router = echo_router();
  std::vector<std::shared_ptr<Exchange>> held;
  std::mutex held_mu;
  router.get("/hold", [&](std::shared_ptr<Exchange> ex) {
    std::lock_guard lock(held_mu);
    held.push_back(std::move(ex));  // answered at the end of the test
  });
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond({200, "text/plain", {}, "ok"}); });
  HttpServer server(cfg, router);
  server.start();
  RawClient busy(server.port());
  busy.send_request("GET", "/hold");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawClient other(server.port());
  auto refused = other.request("GET", "/echo");
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.header("retry-after"), "1");
  EXPECT_NE(refused.body.find("connection limit"), std::string::npos) << refused.body;
  EXPECT_TRUE(other.at_eof());
  RawClient probe(server.port());
  EXPECT_EQ(probe.request("GET", "/health").status, 200);
  EXPECT_TRUE(probe.at_eof()) << "an overflow connection is not kept alive";
  {
    std::lock_guard lock(held_mu);
    ASSERT_EQ(held.size(), 1u);
    held[0]->respond({200, "text/plain", {}, "done"});
  }
  EXPECT_EQ(busy.read_response().status, 200);
}

TEST(HttpServer, AccessLogRecordsEveryResponse) {
  std::mutex mu;
  std::vector<AccessLogEntry> entries;
  auto cfg = test_config();
  cfg.access_log = [&](const AccessLogEntry& e) {
    std::lock_guard lock(mu);
    entries.push_back(e);
  };
  HttpServer server(cfg, echo_router());
  server.start();
  {
    RawClient client(server.port());
    client.request("POST", "/echo?q=1", "abc");
    client.request("GET", "/missing");
  }
  server.stop();
  std::lock_guard lock(mu);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].method, "POST");
  EXPECT_EQ(entries[0].target, "/echo?q=1");
  EXPECT_EQ(entries[0].status, 200);
  EXPECT_EQ(entries[0].body_bytes, 3u);
  EXPECT_TRUE(entries[0].completed);
  EXPECT_GE(entries[0].duration_ms, 0.0);
  EXPECT_NE(entries[0].remote_address.find("127.0.0.1:"), std::string::npos);
  EXPECT_EQ(entries[1].status, 404);
}

TEST(HttpServer, ReportsConfiguredThreadsAndRefusesBadBind) {
  auto cfg = test_config();
  cfg.io_threads = 3;
  HttpServer server(cfg, echo_router());
  EXPECT_EQ(server.io_thread_count(), 3u);
  server.start();

  auto clash = test_config();
  clash.port = server.port();
  HttpServer second(clash, echo_router());
  try {
    second.start();
    FAIL() << "binding a used port must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(server.port())), std::string::npos);
  }
  auto defaults = HttpServerConfig{};
  HttpServer third(defaults, Router{});
  EXPECT_LE(third.io_thread_count(), 4u);
  EXPECT_GE(third.io_thread_count(), 1u);
}

}  // namespace
}  // namespace fp4serve::http
