// `fp4serve bench serve` end to end against a fake OpenAI server living in the test: it streams
// max_tokens SSE chunks, the first after TTFT_MS and the rest ITL_MS apart, serves /v1/models,
// /metrics (a fixed KV usage), /tokenize and /detokenize (a word tokenizer). The measured TTFT and
// ITL must land within 5% of those delays, and the outputs must carry vLLM's table and keys.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench/bench_runner.h"
#include "tools/bench/bench_tokenizer.h"
#include "tools/bench/kv_usage_sampler.h"
#include "tools/bench/request_func.h"
#include "tools/bench/sse_stream.h"
#include "cli_test_util.h"

namespace fp4serve::tools::bench {
namespace {

constexpr int kTtftMs = 200;
constexpr int kItlMs = 25;
constexpr int kVocab = 990;        // ids >= kVocab are "special" <sNNN> up to kModelVocab
constexpr int kModelVocab = 1000;  // /detokenize refuses ids beyond

std::string word_decode(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) {
    s += s.empty() ? "" : " ";
    s += id < kVocab ? "t" + std::to_string(id) : "<s" + std::to_string(id) + ">";
  }
  return s;
}

std::vector<int> word_encode(const std::string& text) {
  std::vector<int> ids;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    try {
      ids.push_back(w[0] == '<' ? std::stoi(w.substr(2, w.size() - 3)) : std::stoi(w.substr(1)));
    } catch (const std::exception&) {
      ids.push_back(0);  // not one of our words
    }
  }
  return ids;
}

class FakeOpenAiServer {
 public:
  FakeOpenAiServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 64) != 0) {
      throw std::runtime_error("fake server: cannot listen");
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeOpenAiServer() {
    stop_ = true;
    acceptor_.join();
    for (auto& t : handlers_) t.join();
    ::close(fd_);
  }
  int port() const { return port_; }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> generation_bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  std::vector<std::string> request_ids() {
    std::lock_guard lock(mu_);
    return request_ids_;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::lock_guard lock(mu_);
      handlers_.emplace_back([this, c] { handle(c); });
    }
  }

  static void send_all(int c, const std::string& s) {
    std::size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(c, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += static_cast<std::size_t>(n);
    }
  }

  static void respond(int c, int status, const std::string& type, const std::string& body) {
    send_all(c, "HTTP/1.1 " + std::to_string(status) + (status == 200 ? " OK" : " Bad Request") +
                    "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n" + body);
  }

  static void send_chunk(int c, const std::string& event) {
    std::ostringstream hex;
    hex << std::hex << event.size();
    send_all(c, hex.str() + "\r\n" + event + "\r\n");
  }

  void stream(int c, const nlohmann::json& req, bool chat, std::chrono::steady_clock::time_point arrival) {
    const int n = req.value(chat ? "max_completion_tokens" : "max_tokens", 1);
    const std::string prompt =
        chat ? req["messages"][0]["content"][0]["text"].get<std::string>() : req["prompt"].get<std::string>();
    const int prompt_tokens = static_cast<int>(word_encode(prompt).size());
    send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                "Connection: close\r\n\r\n");
    // Absolute deadlines from the request's arrival, so a late wake-up (a busy test machine) does
    // not push every later chunk: the mean gap stays ITL_MS.
    const auto t0 = arrival;
    for (int i = 0; i < n; ++i) {
      std::this_thread::sleep_until(t0 + std::chrono::milliseconds(kTtftMs + i * kItlMs));
      nlohmann::json choice = {{"index", 0}, {"finish_reason", i + 1 == n ? nlohmann::json("length") : nlohmann::json()}};
      if (chat) {
        choice["delta"] = {{"content", " t" + std::to_string(i)}};
      } else {
        choice["text"] = " t" + std::to_string(i);
      }
      send_chunk(c, "data: " + nlohmann::json({{"id", "x"}, {"choices", {choice}}}).dump() + "\n\n");
    }
    const nlohmann::json usage = {{"prompt_tokens", prompt_tokens}, {"completion_tokens", n},
                                  {"total_tokens", prompt_tokens + n}};
    send_chunk(c, "data: " + nlohmann::json({{"id", "x"}, {"choices", nlohmann::json::array()}, {"usage", usage}}).dump() +
                      "\n\n");
    send_chunk(c, "data: [DONE]\n\n");
    send_all(c, "0\r\n\r\n");
  }

  void handle(int c) {
    const auto arrival = std::chrono::steady_clock::now();
    std::string data;
    char buf[4096];
    std::size_t header_end;
    while ((header_end = data.find("\r\n\r\n")) == std::string::npos) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return ::close(c), void();
      data.append(buf, static_cast<std::size_t>(n));
    }
    std::size_t content_length = 0;
    std::string request_id;
    std::istringstream hs(data.substr(0, header_end));
    std::string method, target, line;
    hs >> method >> target;
    std::getline(hs, line);
    while (std::getline(hs, line)) {
      std::string lower = line;
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (lower.rfind("content-length:", 0) == 0) content_length = std::stoul(line.substr(15));
      if (lower.rfind("x-request-id:", 0) == 0) request_id = line.substr(14, line.find('\r') - 14);
    }
    std::string body = data.substr(header_end + 4);
    while (body.size() < content_length) {
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      body.append(buf, static_cast<std::size_t>(n));
    }
    if (target == "/v1/models") {
      respond(c, 200, "application/json", R"({"object":"list","data":[{"id":"fake-model","root":"/models/fake"}]})");
    } else if (target == "/metrics") {
      respond(c, 200, "text/plain",
              "# HELP vllm:kv_cache_usage_perc KV-cache usage.\n# TYPE vllm:kv_cache_usage_perc gauge\n"
              "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"fake-model\"} 0.42\n");
    } else if (target == "/tokenize") {
      const auto j = nlohmann::json::parse(body);
      respond(c, 200, "application/json", nlohmann::json({{"tokens", word_encode(j["prompt"])}}).dump());
    } else if (target == "/detokenize") {
      const auto ids = nlohmann::json::parse(body)["tokens"].get<std::vector<int>>();
      for (int id : ids) {
        if (id >= kModelVocab) return respond(c, 400, "application/json", "{}"), ::close(c), void();
      }
      respond(c, 200, "application/json", nlohmann::json({{"prompt", word_decode(ids)}}).dump());
    } else if (target == "/v1/completions" || target == "/v1/chat/completions") {
      const auto j = nlohmann::json::parse(body);
      {
        std::lock_guard lock(mu_);
        bodies_.push_back(j);
        request_ids_.push_back(request_id);
      }
      stream(c, j, target == "/v1/chat/completions", arrival);
    } else {
      respond(c, 404, "application/json", "{}");
    }
    ::close(c);
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> handlers_;
  std::vector<nlohmann::json> bodies_;
  std::vector<std::string> request_ids_;
};

BenchConfig small_config(const FakeOpenAiServer& server) {
  BenchConfig c;
  c.base_url = server.base_url();
  c.num_prompts = 4;
  c.random_input_len = 16;
  c.random_output_len = 8;
  c.seed = 3;
  c.temperature = 0.0;
  return c;
}

TEST(BenchServe, ServerTokenizerFindsTheVocabularyAndSpecialIds) {
  FakeOpenAiServer server;
  ServerBenchTokenizer tok(parse_base_url(server.base_url()), "fake-model", {});
  EXPECT_EQ(tok.vocab_size(), kVocab);
  EXPECT_EQ(tok.all_special_ids().size(), static_cast<std::size_t>(kModelVocab - kVocab));
  EXPECT_EQ(tok.num_special_tokens_to_add(), 0);
  EXPECT_EQ(tok.encode(tok.decode({5, 6, 7})), (std::vector<std::int32_t>{5, 6, 7}));
}

TEST(BenchServe, CompletionsRunMeasuresTheServersDelays) {
  FakeOpenAiServer server;
  BenchConfig cfg = small_config(server);
  cfg.percentile_metrics = "ttft,tpot,itl,e2el";
  std::ostringstream out;
  const BenchRun run = run_bench(cfg, out);
  const BenchmarkMetrics& m = run.metrics;
  ASSERT_EQ(m.completed, 4) << out.str();
  EXPECT_EQ(m.failed, 0);
  EXPECT_EQ(m.total_input, 4 * 16);  // usage.prompt_tokens
  EXPECT_EQ(m.total_output, 4 * 8);  // usage.completion_tokens
  EXPECT_NEAR(m.ttft.mean_ms, kTtftMs, 0.05 * kTtftMs);
  EXPECT_NEAR(m.itl.mean_ms, kItlMs, 0.05 * kItlMs);
  EXPECT_NEAR(m.tpot.mean_ms, kItlMs, 0.05 * kItlMs);
  EXPECT_NEAR(m.e2el.mean_ms, kTtftMs + 7 * kItlMs, 0.05 * (kTtftMs + 7 * kItlMs));
  for (const auto& o : run.outputs) EXPECT_EQ(o.itl.size(), 7u);  // one gap per chunk after the first
  EXPECT_EQ(m.max_concurrent_requests, 4);

  // The request bodies vLLM sends for completions, ignore_eos forced on for the random dataset.
  const auto bodies = server.generation_bodies();
  ASSERT_EQ(bodies.size(), 4u);
  EXPECT_EQ(bodies[0]["model"], "fake-model");
  EXPECT_EQ(bodies[0]["max_tokens"], 8);
  EXPECT_EQ(bodies[0]["stream"], true);
  EXPECT_EQ(bodies[0]["stream_options"]["include_usage"], true);
  EXPECT_EQ(bodies[0]["ignore_eos"], true);
  EXPECT_EQ(bodies[0]["temperature"], 0.0);
  EXPECT_EQ(bodies[0]["repetition_penalty"], 1.0);
  for (const auto& id : server.request_ids()) EXPECT_EQ(id.rfind("bench-", 0), 0u) << id;

  // The printed block, with the KV peak line after it.
  const std::string text = out.str();
  for (const char* row : {"============ Serving Benchmark Result ============\n", "Successful requests:                     4         \n",
                          "Total generated tokens:                  32        \n", "Mean TTFT (ms):", "Median TPOT (ms):",
                          "P99 ITL (ms):", "----------------End-to-end Latency----------------\n", "Mean E2EL (ms):",
                          "==================================================\nPeak KV cache usage: 42.0%\n"}) {
    EXPECT_NE(text.find(row), std::string::npos) << row << "\n" << text;
  }
  ASSERT_TRUE(run.result["peak_kv_cache_usage"].is_number());
  EXPECT_DOUBLE_EQ(run.result["peak_kv_cache_usage"].get<double>(), 0.42);
}

TEST(BenchServe, ChatRunSavesVllmKeysAndPlot) {
  FakeOpenAiServer server;
  BenchConfig cfg = small_config(server);
  cfg.backend = "openai-chat";
  cfg.endpoint = "/v1/chat/completions";
  cfg.max_concurrency = 2;
  const auto dir = std::filesystem::temp_directory_path() / ("fp4serve_bench_test_" + std::to_string(::getpid()));
  cfg.save_result = true;
  cfg.result_dir = dir.string();
  cfg.plot = (dir / "plot.svg").string();
  std::filesystem::create_directories(dir);
  std::ostringstream out;
  const BenchRun run = run_bench(cfg, out);
  ASSERT_EQ(run.metrics.completed, 4) << out.str();
  EXPECT_EQ(run.metrics.max_concurrent_requests, 2);
  EXPECT_NE(out.str().find("Maximum request concurrency:             2         \n"), std::string::npos);
  const auto bodies = server.generation_bodies();
  ASSERT_FALSE(bodies.empty());
  EXPECT_EQ(bodies[0]["max_completion_tokens"], 8);
  EXPECT_EQ(bodies[0]["messages"][0]["content"][0]["type"], "text");

  // File name as vLLM builds it: {label}-{rate}qps-concurrency{N}-{model basename}-{date}.json
  const std::string name = std::filesystem::path(run.result_file).filename().string();
  EXPECT_EQ(name.rfind("openai-chat-infqps-concurrency2-fake-", 0), 0u) << name;
  std::ifstream f(run.result_file);
  const auto saved = nlohmann::ordered_json::parse(f);
  std::vector<std::string> keys;
  for (const auto& [k, v] : saved.items()) keys.push_back(k);
  const std::vector<std::string> expected = {
      "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts", "request_rate",
      "burstiness", "max_concurrency", "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
      "request_throughput", "request_goodput", "output_throughput", "total_token_throughput", "latencies",
      "queue_times", "max_output_tokens_per_s", "max_concurrent_requests", "rtfx", "mean_ttft_ms", "median_ttft_ms",
      "std_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms", "mean_itl_ms",
      "median_itl_ms", "std_itl_ms", "p99_itl_ms", "peak_kv_cache_usage"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(saved["model_id"], "/models/fake");
  EXPECT_EQ(saved["request_rate"], "inf");
  EXPECT_EQ(saved["completed"], 4);

  std::ifstream svg(*cfg.plot);
  const std::string s((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  for (const char* panel : {"Output tokens/s", "KV cache usage", "TTFT (n=4)", "ITL (n=28)"}) {
    EXPECT_NE(s.find(panel), std::string::npos) << panel;
  }
  std::filesystem::remove_all(dir);
}

TEST(BenchServe, FailedRequestsAreCountedNotFatal) {
  FakeOpenAiServer server;
  BenchConfig cfg = small_config(server);
  cfg.endpoint = "/v2/completions";  // the fake answers 404
  cfg.num_prompts = 2;
  std::ostringstream out;
  const BenchRun run = run_bench(cfg, out);
  EXPECT_EQ(run.metrics.completed, 0);
  EXPECT_EQ(run.metrics.failed, 2);
  EXPECT_NE(out.str().find("Failed requests:                         2         \n"), std::string::npos);
}

TEST(BenchServe, KvUsageParserReadsTheGauge) {
  EXPECT_DOUBLE_EQ(*parse_kv_cache_usage("# TYPE vllm:kv_cache_usage_perc gauge\n"
                                         "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"a b\"} 0.25\n"
                                         "vllm:kv_cache_usage_perc_other 0.9\n"),
                   0.25);
  EXPECT_FALSE(parse_kv_cache_usage("vllm:num_requests_running 3\n").has_value());
}

TEST(BenchServe, UnsupportedVllmFlagsAreRefusedByName) {
  const auto r = fp4serve::testing::run_fp4serve("bench serve --dataset-path data.json");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--dataset-path is not supported"), std::string::npos) << r.output;
  const auto r2 = fp4serve::testing::run_fp4serve("bench serve --sharegpt-output-len 5");
  EXPECT_NE(r2.exit_code, 0);
  EXPECT_NE(r2.output.find("dataset"), std::string::npos) << r2.output;
  const auto r3 = fp4serve::testing::run_fp4serve("bench serve --base-url http://127.0.0.1:1 --num-prompts 1");
  EXPECT_NE(r3.exit_code, 0);
  EXPECT_NE(r3.output.find("/v1/models"), std::string::npos) << r3.output;
}

}  // namespace
}  // namespace fp4serve::tools::bench
