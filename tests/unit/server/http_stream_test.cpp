// Streamed responses: SSE order from a producer thread, client disconnect detection, back-pressure,
// drain at shutdown, and 1,000 concurrent streams on a fixed thread pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "http_test_support.h"

namespace fp4serve::http {
namespace {

using testing::RawClient;
using testing::test_config;

// Collects exchanges handed to a streaming route so a test thread can play the engine.
struct ExchangeSink {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<Exchange>> exchanges;

  Handler handler(bool start_stream = true) {
    return [this, start_stream](std::shared_ptr<Exchange> ex) {
      if (start_stream) ex->start_stream(200, {{"x-request-id", "abc"}});
      std::lock_guard lock(mu);
      exchanges.push_back(std::move(ex));
      cv.notify_all();
    };
  }
  std::vector<std::shared_ptr<Exchange>> wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    bool ok = cv.wait_for(lock, std::chrono::seconds(60), [&] { return exchanges.size() >= n; });
    EXPECT_TRUE(ok) << "only " << exchanges.size() << " of " << n << " requests arrived";
    return exchanges;
  }
};

std::string sse_event(int i) { return "data: {\"i\":" + std::to_string(i) + "}\n\n"; }

TEST(HttpStream, ChunksFromAProducerThreadArriveInOrder) {
  ExchangeSink sink;
  Router router;
  router.post("/v1/completions", sink.handler());
  HttpServer server(test_config(), router);
  server.start();
  RawClient client(server.port());
  client.send_request("POST", "/v1/completions", R"({"stream":true})");
  auto ex = sink.wait_for(1).at(0);

  constexpr int kEvents = 500;
  std::thread producer([&] {
    for (int i = 0; i < kEvents; ++i) ASSERT_TRUE(ex->write(sse_event(i)));
    ASSERT_TRUE(ex->finish("data: [DONE]\n\n"));
    EXPECT_FALSE(ex->write("late")) << "writes after finish are refused";
  });
  testing::ClientResponse r;
  try {
    r = client.read_response();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "reading the stream failed: " << e.what();
  }
  producer.join();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.header("x-request-id"), "abc");
  ASSERT_TRUE(r.chunked);
  ASSERT_EQ(r.chunks.size(), static_cast<std::size_t>(kEvents + 1));
  for (int i = 0; i < kEvents; ++i) ASSERT_EQ(r.chunks[i], sse_event(i)) << "chunk " << i;
  EXPECT_EQ(r.chunks.back(), "data: [DONE]\n\n");

  // Keep-alive holds after a stream: the next request on the same connection works.
  client.send_request("POST", "/v1/completions", "{}");
  auto second = sink.wait_for(2).at(1);
  second->finish();
  auto r2 = client.read_response();
  EXPECT_EQ(r2.status, 200);
  EXPECT_TRUE(r2.chunks.empty());
}

TEST(HttpStream, ExchangeStateMachineRefusesMisuse) {
  ExchangeSink sink;
  Router router;
  router.post("/s", sink.handler(false));
  HttpServer server(test_config(), router);
  server.start();
  RawClient client(server.port());
  client.send_request("POST", "/s", "{}");
  auto ex = sink.wait_for(1).at(0);
  EXPECT_FALSE(ex->write("x")) << "write before start_stream";
  EXPECT_FALSE(ex->finish()) << "finish before start_stream";
  EXPECT_TRUE(ex->respond(HttpResponse{201, "application/json", {}, "{}"}));
  EXPECT_FALSE(ex->respond(HttpResponse{}));
  EXPECT_FALSE(ex->start_stream());
  EXPECT_EQ(client.read_response().status, 201);
}

void expect_on_close_when_client_leaves(bool streaming, bool with_reset) {
  ExchangeSink sink;
  Router router;
  router.post("/v1/chat/completions", sink.handler(streaming));
  HttpServer server(test_config(), router);
  server.start();
  auto client = std::make_unique<RawClient>(server.port());
  client->send_request("POST", "/v1/chat/completions", "{}");
  auto ex = sink.wait_for(1).at(0);
  std::promise<CloseReason> closed;
  auto fired = closed.get_future();
  ex->on_close([&closed](CloseReason reason) { closed.set_value(reason); });
  if (streaming) ASSERT_TRUE(ex->write(sse_event(0)));
  EXPECT_FALSE(ex->closed());
  if (with_reset) client->reset(); else client->close();
  // Generous bound only so that a bug fails instead of hanging; detection is event-driven.
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fired.get(), CloseReason::client_closed);
  EXPECT_TRUE(ex->closed());
  EXPECT_FALSE(ex->write(sse_event(1)));
  EXPECT_FALSE(ex->respond(HttpResponse{}));
  // Registering after the fact still fires, but not inside the call (the caller may hold a lock
  // that the callback takes, as the routes do).
  std::mutex caller_lock;
  std::promise<CloseReason> late;
  auto late_fired = late.get_future();
  {
    std::lock_guard hold(caller_lock);
    ex->on_close([&](CloseReason reason) {
      std::lock_guard inner(caller_lock);
      late.set_value(reason);
    });
  }
  ASSERT_EQ(late_fired.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(late_fired.get(), CloseReason::client_closed);
  EXPECT_EQ(server.in_flight(), 0u);
}

TEST(HttpStream, ClientCloseFiresOnCloseWhileStreaming) { expect_on_close_when_client_leaves(true, false); }
TEST(HttpStream, ClientResetFiresOnCloseWhileStreaming) { expect_on_close_when_client_leaves(true, true); }
TEST(HttpStream, ClientCloseFiresOnCloseWhileWaitingForEngine) {
  expect_on_close_when_client_leaves(false, false);
}

TEST(HttpStream, CompletedResponseNeverFiresOnClose) {
  ExchangeSink sink;
  Router router;
  router.post("/s", sink.handler());
  HttpServer server(test_config(), router);
  server.start();
  RawClient client(server.port());
  client.send_request("POST", "/s", "{}");
  auto ex = sink.wait_for(1).at(0);
  std::atomic<bool> fired{false};
  ex->on_close([&](CloseReason) { fired = true; });
  ex->finish(sse_event(0));
  EXPECT_EQ(client.read_response().chunks.size(), 1u);
  client.close();
  server.stop();
  EXPECT_FALSE(fired);
}

TEST(HttpStream, SlowReaderIsDroppedAtTheBufferCap) {
  auto cfg = test_config();
  cfg.max_stream_buffer_bytes = 256 * 1024;
  ExchangeSink sink;
  Router router;
  router.post("/s", sink.handler());
  HttpServer server(cfg, router);
  server.start();
  RawClient client(server.port());  // sends, then never reads
  client.send_request("POST", "/s", "{}");
  auto ex = sink.wait_for(1).at(0);
  std::promise<CloseReason> closed;
  auto fired = closed.get_future();
  ex->on_close([&closed](CloseReason reason) { closed.set_value(reason); });
  const std::string chunk(64 * 1024, 'x');
  std::size_t written = 0;
  bool refused = false;
  // The kernel buffers a few MiB on loopback; past that the cap must trip well before 1 GiB.
  while (written < (1u << 30)) {
    if (!ex->write(chunk)) {
      refused = true;
      break;
    }
    written += chunk.size();
  }
  EXPECT_TRUE(refused);
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fired.get(), CloseReason::slow_reader);
  EXPECT_FALSE(ex->write(chunk));
}

TEST(HttpStream, DrainLetsInFlightStreamsFinishThenStops) {
  ExchangeSink sink;
  Router router;
  router.post("/v1/completions", sink.handler());
  router.get("/health", [](std::shared_ptr<Exchange> ex) { ex->respond(HttpResponse{200, "", {}, ""}); });
  HttpServer server(test_config(), router);
  server.start();
  const unsigned short port = server.port();

  RawClient streaming(port);
  streaming.send_request("POST", "/v1/completions", "{}");
  auto ex = sink.wait_for(1).at(0);
  ASSERT_TRUE(ex->write(sse_event(0)));
  // The lead's drain policy: a final error event, then finish.
  ex->on_drain([ex] {
    ex->write("data: {\"error\":{\"message\":\"server shutting down\"}}\n\n");
    ex->finish("data: [DONE]\n\n");
  });
  RawClient idle(port);  // keep-alive connection with nothing in flight
  ASSERT_EQ(idle.request("GET", "/health").status, 200);

  std::vector<std::string> seen;
  server.for_each_in_flight([&](const std::shared_ptr<Exchange>& e) { seen.push_back(e->request().path); });
  // (/health may still be listed for a moment: it leaves when its write completes.)
  EXPECT_NE(std::find(seen.begin(), seen.end(), "/v1/completions"), seen.end());

  server.stop_accepting();
  EXPECT_THROW(RawClient{port}, boost::system::system_error) << "no new connections after stop_accepting";
  server.begin_drain();
  EXPECT_TRUE(server.wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  auto r = streaming.read_response();
  ASSERT_EQ(r.chunks.size(), 3u);
  EXPECT_EQ(r.chunks[0], sse_event(0));
  EXPECT_NE(r.chunks[1].find("server shutting down"), std::string::npos);
  EXPECT_EQ(r.chunks[2], "data: [DONE]\n\n");
  EXPECT_EQ(r.header("connection"), "");  // head went out before the drain began
  EXPECT_TRUE(streaming.at_eof()) << "draining closes the connection after the response";
  EXPECT_TRUE(idle.at_eof()) << "idle keep-alive connections are closed by the drain";
  server.stop();
  EXPECT_EQ(server.in_flight(), 0u);
}

TEST(HttpStream, StopClosesStreamsThatIgnoreTheDrain) {
  ExchangeSink sink;
  Router router;
  router.post("/s", sink.handler());
  HttpServer server(test_config(), router);
  server.start();
  RawClient client(server.port());
  client.send_request("POST", "/s", "{}");
  auto ex = sink.wait_for(1).at(0);
  std::promise<CloseReason> closed;
  auto fired = closed.get_future();
  ex->on_close([&closed](CloseReason reason) { closed.set_value(reason); });
  EXPECT_FALSE(server.shutdown(std::chrono::milliseconds(20))) << "the stream never finished";
  ASSERT_EQ(fired.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(fired.get(), CloseReason::server_shutdown);
  EXPECT_FALSE(ex->write("after stop"));
}

TEST(HttpStream, ThousandConcurrentStreamsOnAFixedThreadPool) {
  constexpr std::size_t kClients = 1000;
  constexpr int kEvents = 5;
  const int threads_before = testing::process_thread_count();
  ASSERT_GT(threads_before, 0);

  ExchangeSink sink;
  Router router;
  router.post("/v1/completions", sink.handler());
  auto cfg = test_config();
  cfg.io_threads = 2;
  HttpServer server(cfg, router);
  server.start();

  std::vector<std::unique_ptr<RawClient>> clients;
  clients.reserve(kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawClient>(server.port()));
    clients.back()->send_request("POST", "/v1/completions", "{\"n\":" + std::to_string(i) + "}");
  }
  auto exchanges = sink.wait_for(kClients);
  ASSERT_EQ(exchanges.size(), kClients);
  EXPECT_EQ(server.in_flight(), kClients);
  EXPECT_EQ(server.open_connections(), kClients);
  // Thread count is the pool size, not the connection count (+1 for the producer below).
  EXPECT_LE(testing::process_thread_count(), threads_before + static_cast<int>(server.io_thread_count()));

  std::thread producer([&] {
    // Interleave streams the way one engine step emits one token per running request.
    for (int e = 0; e < kEvents; ++e) {
      for (auto& ex : exchanges) ex->write(ex->request().body + sse_event(e));
    }
    for (auto& ex : exchanges) ex->finish("data: [DONE]\n\n");
  });
  EXPECT_LE(testing::process_thread_count(), threads_before + static_cast<int>(server.io_thread_count()) + 1);
  for (std::size_t i = 0; i < kClients; ++i) {
    auto r = clients[i]->read_response();
    ASSERT_EQ(r.status, 200);
    ASSERT_EQ(r.chunks.size(), static_cast<std::size_t>(kEvents + 1)) << "client " << i;
    for (int e = 0; e < kEvents; ++e) {
      ASSERT_EQ(r.chunks[e], "{\"n\":" + std::to_string(i) + "}" + sse_event(e));
    }
  }
  producer.join();
  EXPECT_TRUE(server.wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  EXPECT_EQ(server.in_flight(), 0u);
}

}  // namespace
}  // namespace fp4serve::http
