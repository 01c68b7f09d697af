#include "tools/bench/bench_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "tools/bench/bench_report.h"
#include "tools/bench/bench_tokenizer.h"
#include "tools/bench/svg_plot.h"

namespace fp4serve::tools::bench {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) parts.push_back(cur);
  return parts;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::pair<std::string, std::string> key_value(const std::string& item, const std::string& flag) {
  const auto eq = item.find('=');
  if (eq == std::string::npos) throw BenchConfigError("Invalid " + flag + " format '" + item + "'. Please use KEY=VALUE format.");
  return {trim(item.substr(0, eq)), trim(item.substr(eq + 1))};
}

std::string random_hex8() {
  std::random_device rd;
  return fmt::format("{:08x}", rd());
}

struct ServerModel {
  std::string name;  // data[0].id
  std::string root;  // data[0].root
};

ServerModel first_model_from_server(const BaseUrl& base, const HeaderMap& headers) {
  HttpResponse r;
  try {
    r = http_get(base, "/v1/models", headers);
  } catch (const BenchHttpError& e) {
    throw BenchConfigError("Failed to fetch models from server at " + base.text() +
                           "/v1/models. Check that the server is running and the URL is correct. Error: " + e.what());
  }
  if (r.status != 200) {
    throw BenchConfigError("GET " + base.text() + "/v1/models answered " + std::to_string(r.status) + " " + r.reason);
  }
  const auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) {
    throw BenchConfigError("No models found on the server at " + base.text() +
                           ". Make sure the server is running and has models loaded.");
  }
  ServerModel m;
  m.name = j["data"][0].value("id", "");
  m.root = j["data"][0].contains("root") && j["data"][0]["root"].is_string() ? j["data"][0]["root"].get<std::string>() : m.name;
  return m;
}

// _align_prompts_to_server_tokenizer: if the server counts the first prompt differently, cut every
// prompt to its token count with the server's own tokenizer.
void align_prompts_to_server(const BaseUrl& base, const std::string& model, const HeaderMap& headers,
                             std::vector<SampleRequest>& reqs, std::ostream& out) {
  ServerBenchTokenizer server(base, model, headers);
  std::vector<std::int32_t> first;
  try {
    first = server.encode(reqs.front().prompt);
  } catch (const std::exception&) {
    out << "WARNING: /tokenize unavailable, skipping alignment.\n";
    return;
  }
  const int expected = reqs.front().prompt_len;
  if (static_cast<int>(first.size()) == expected) return;
  out << "WARNING: tokenizer mismatch (server=" << first.size() << ", expected=" << expected << "), re-aligning prompts.\n";
  for (SampleRequest& r : reqs) {
    try {
      auto ids = server.encode(r.prompt);
      if (static_cast<int>(ids.size()) <= r.prompt_len) continue;
      ids.resize(static_cast<std::size_t>(r.prompt_len));
      r.prompt = server.decode(ids);
    } catch (const std::exception&) {
      // vLLM keeps the original request when a fix fails
    }
  }
}

std::map<std::string, double> parse_goodput(const std::vector<std::string>& pairs) {
  std::map<std::string, double> g;
  for (const std::string& p : pairs) {
    const auto colon = p.find(':');
    double v = 0;
    try {
      if (colon == std::string::npos) throw std::invalid_argument(p);
      v = std::stod(p.substr(colon + 1));
    } catch (const std::exception&) {
      throw BenchConfigError("Invalid format found for service level objectives. Specify service level objectives for "
                             "goodput as \"KEY:VALUE\" pairs, where the key is a metric name, and the value is a number "
                             "in milliseconds.");
    }
    const std::string name = p.substr(0, colon);
    if (name != "ttft" && name != "tpot" && name != "e2el") {
      throw BenchConfigError("Invalid metric name found, " + name + ": " + p.substr(colon + 1) +
                             ". The service level objective name should be one of ['ttft', 'tpot', 'e2el'].");
    }
    if (v < 0) throw BenchConfigError("Invalid value found, " + p + ". The service level objective value should be non-negative.");
    g[name] = v;
  }
  return g;
}

// Sends every request at its arrival offset; at most `workers` run at once, first come first served
// (asyncio.Semaphore order).
std::vector<RequestOutput> dispatch(const BaseUrl& base, const std::vector<RequestInput>& inputs,
                                    const std::vector<double>& offsets, std::size_t workers, double start) {
  std::vector<RequestOutput> outputs(inputs.size());
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<std::size_t, double>> queue;  // (index, arrival time)
  bool done = false;
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (std::size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      while (true) {
        std::pair<std::size_t, double> job;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return done || !queue.empty(); });
          if (queue.empty()) return;
          job = queue.front();
          queue.pop_front();
        }
        RequestOutput o = run_request(base, inputs[job.first]);
        o.client_queue_time = o.start_time - job.second;
        outputs[job.first] = std::move(o);
      }
    });
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const double wait = start + offsets[i] - perf_counter();
    if (offsets[i] > 0 && wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    {
      std::lock_guard lock(mu);
      queue.emplace_back(i, perf_counter());
    }
    cv.notify_one();
  }
  {
    std::lock_guard lock(mu);
    done = true;
  }
  cv.notify_all();
  for (auto& t : pool) t.join();
  return outputs;
}

std::string current_datetime() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

}  // namespace

std::vector<double> arrival_offsets(std::size_t n, double rate, double burstiness, std::uint64_t seed) {
  std::vector<double> d(n, 0.0);
  if (std::isinf(rate) || n == 0) return d;
  if (!(rate > 0)) throw BenchConfigError("--request-rate must be positive, got " + python_float_str(rate));
  if (!(burstiness > 0)) throw BenchConfigError("A positive burstiness factor is expected, but given " + python_float_str(burstiness));
  // numpy's legacy np.random.gamma is not reproduced; the distribution is the same.
  std::mt19937_64 gen(seed);
  std::gamma_distribution<double> gamma(burstiness, 1.0 / (rate * burstiness));
  for (std::size_t i = 0; i < n; ++i) d[i] = std::isinf(burstiness) ? 1.0 / rate : gamma(gen);
  for (std::size_t i = 1; i < n; ++i) d[i] += d[i - 1];
  if (d.back() != 0) {
    const double scale = (static_cast<double>(n) / rate) / d.back();
    for (double& x : d) x *= scale;
  }
  return d;
}

BenchRun run_bench(const BenchConfig& cfg, std::ostream& out) {
  if (cfg.max_concurrency && *cfg.max_concurrency <= 0) throw BenchConfigError("--max-concurrency must be greater than 0");
  EndpointKind kind;
  if (cfg.backend == "openai" || cfg.backend == "vllm") {
    kind = EndpointKind::kCompletions;
    if (!cfg.endpoint.ends_with("completions")) {
      throw BenchConfigError("OpenAI Completions API URL must end with 'completions' (got --endpoint " + cfg.endpoint + ")");
    }
  } else if (cfg.backend == "openai-chat") {
    kind = EndpointKind::kChat;
    if (!cfg.endpoint.ends_with("chat/completions")) {
      throw BenchConfigError("OpenAI Chat Completions API URL must end with 'chat/completions' (got --endpoint " +
                             cfg.endpoint + "); use --endpoint /v1/chat/completions with --backend openai-chat");
    }
  } else {
    throw BenchConfigError("--backend " + cfg.backend + " is not supported by fp4serve bench (use openai, vllm or openai-chat)");
  }
  if (cfg.dataset_name != "random") {
    throw BenchConfigError("--dataset-name " + cfg.dataset_name + " is not supported by fp4serve bench; only 'random' is");
  }

  const BaseUrl base = parse_base_url(cfg.base_url ? *cfg.base_url : fmt::format("http://{}:{}", cfg.host, cfg.port));
  HeaderMap headers;
  for (const auto& h : cfg.header) headers.insert(key_value(h, "header"));

  std::string model_id, model_name;
  if (!cfg.model) {
    out << "Model not specified, fetching first model from server...\n";
    const ServerModel m = first_model_from_server(base, headers);
    model_name = m.name;
    model_id = m.root;
    out << "First model name: " << model_name << ", first model id: " << model_id << "\n";
  } else {
    model_id = *cfg.model;
    model_name = cfg.served_model_name.value_or("");
  }
  const std::string sent_model = model_name.empty() ? model_id : model_name;

  std::unique_ptr<BenchTokenizer> tokenizer;
  std::string tokenizer_id;
  if (cfg.tokenizer) {
    tokenizer = std::make_unique<LocalBenchTokenizer>(*cfg.tokenizer);
    tokenizer_id = *cfg.tokenizer;
  } else {
    tokenizer = std::make_unique<ServerBenchTokenizer>(base, sent_model, headers);
    tokenizer_id = model_id;
  }

  RandomDatasetOptions ds;
  ds.num_requests = cfg.num_prompts;
  ds.input_len = cfg.input_len.value_or(cfg.random_input_len);
  ds.output_len = cfg.output_len.value_or(cfg.random_output_len);
  ds.range_ratio = cfg.random_range_ratio;
  ds.prefix_len = cfg.random_prefix_len;
  ds.seed = cfg.seed;
  ds.request_id_prefix = cfg.request_id_prefix.value_or("bench-" + random_hex8() + "-");
  std::int64_t mismatch = 0;
  std::vector<SampleRequest> requests;
  try {
    requests = sample_random_requests(*tokenizer, ds, &mismatch);
  } catch (const BenchHttpError& e) {
    throw BenchConfigError(std::string("building the random dataset with the server's /tokenize and /detokenize failed (") +
                           e.what() + "); pass --tokenizer DIR to tokenize locally");
  }
  if (mismatch != 0) {
    out << "WARNING: Across all generated prompts, there were " << std::llabs(mismatch) << (mismatch > 0 ? " more" : " fewer")
        << " tokens than expected after decoding and re-encoding. This is expected due to the imperfect nature of the "
           "sampling procedure.\n";
  }
  if (cfg.tokenizer) align_prompts_to_server(base, sent_model, headers, requests, out);

  const auto goodput = parse_goodput(cfg.goodput);

  nlohmann::json extra_body = nlohmann::json::object();
  const std::vector<std::pair<const char*, std::optional<double>>> sampling = {
      {"top_p", cfg.top_p}, {"min_p", cfg.min_p}, {"temperature", cfg.temperature},
      {"frequency_penalty", cfg.frequency_penalty}, {"presence_penalty", cfg.presence_penalty},
      {"repetition_penalty", cfg.repetition_penalty}};
  if (cfg.top_k) extra_body["top_k"] = *cfg.top_k;
  for (const auto& [k, v] : sampling) {
    if (v) extra_body[k] = *v;
  }
  if (!cfg.temperature) {
    out << "WARNING: vllm bench serve no longer sets temperature==0 (greedy) in requests by default. The default will be "
           "determined on the server side and can be model/API specific. For the old behavior, include --temperature=0.\n";
  }
  if (cfg.extra_body) {
    const auto j = nlohmann::json::parse(*cfg.extra_body, nullptr, false);
    if (!j.is_object()) throw BenchConfigError("--extra-body must be a JSON object, got: " + *cfg.extra_body);
    for (const auto& [k, v] : j.items()) extra_body[k] = v;
  }

  std::vector<std::string> selected_metrics = split(cfg.percentile_metrics.value_or("ttft,tpot,itl"), ',');
  for (const auto& m : selected_metrics) {
    static const std::vector<std::string> kAllowed = {"ttft", "tpot", "itl", "e2el", "client_queue_time",
                                                      "e2el_including_client_queue"};
    if (std::find(kAllowed.begin(), kAllowed.end(), m) == kAllowed.end()) {
      throw BenchConfigError("--percentile-metrics: unknown metric '" + m +
                             "' (allowed: ttft, tpot, itl, e2el, client_queue_time, e2el_including_client_queue)");
    }
  }
  std::vector<double> percentiles;
  for (const auto& p : split(cfg.metric_percentiles, ',')) {
    try {
      percentiles.push_back(std::stod(p));
    } catch (const std::exception&) {
      throw BenchConfigError("--metric-percentiles: '" + p + "' is not a number");
    }
  }

  // vLLM: random datasets with OpenAI-compatible backends always ignore EOS.
  const bool ignore_eos = true;
  std::vector<RequestInput> inputs;
  inputs.reserve(requests.size());
  for (const SampleRequest& r : requests) {
    RequestInput in;
    in.kind = kind;
    in.endpoint = cfg.endpoint;
    in.prompt = r.prompt;
    in.prompt_len = r.prompt_len;
    in.output_len = r.expected_output_len;
    in.model = sent_model;
    in.ignore_eos = ignore_eos;
    in.extra_body = extra_body;
    if (cfg.logprobs) in.extra_body["logprobs"] = *cfg.logprobs;
    in.extra_headers = headers;
    in.request_id = r.request_id;
    inputs.push_back(std::move(in));
  }
  RequestInput test_input = inputs.front();
  test_input.request_id.clear();

  if (cfg.ready_check_timeout_sec > 0) {
    out << "Starting initial single prompt test run...\n";
    const double deadline = perf_counter() + cfg.ready_check_timeout_sec;
    RequestOutput t;
    while (true) {
      t = run_request(base, test_input);
      if (t.success || perf_counter() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::seconds(5));
    }
    if (!t.success) {
      throw BenchConfigError("Initial test run failed - Please make sure benchmark arguments are correctly specified. Error: " +
                             t.error);
    }
    out << "Initial test run completed.\n";
  } else {
    out << "Skipping endpoint ready check.\n";
  }
  if (cfg.num_warmups > 0) {
    out << "Warming up with " << cfg.num_warmups << " requests...\n";
    std::vector<RequestInput> warm(static_cast<std::size_t>(cfg.num_warmups), test_input);
    const auto workers = std::min<std::size_t>(warm.size(), cfg.max_concurrency ? *cfg.max_concurrency : warm.size());
    dispatch(base, warm, std::vector<double>(warm.size(), 0.0), workers, perf_counter());
    out << "Warmup run completed.\n";
  }

  out << "Starting main benchmark run...\n";
  out << "Traffic request rate: " << python_float_str(cfg.request_rate) << "\n";
  out << "Burstiness factor: " << python_float_str(cfg.burstiness) << " ("
      << (cfg.burstiness == 1.0 ? "Poisson process" : "Gamma distribution") << ")\n";
  out << "Maximum request concurrency: " << (cfg.max_concurrency ? std::to_string(*cfg.max_concurrency) : "None") << "\n";
  out.flush();

  const std::vector<double> offsets = arrival_offsets(inputs.size(), cfg.request_rate, cfg.burstiness, cfg.seed);
  KvUsageSampler sampler(base, headers, cfg.kv_sample_interval_s);
  sampler.start();
  const double start = perf_counter();
  const auto workers = std::min<std::size_t>(inputs.size(), cfg.max_concurrency ? *cfg.max_concurrency : inputs.size());
  BenchRun run;
  run.outputs = dispatch(base, inputs, offsets, workers, start);
  const double duration = perf_counter() - start;
  sampler.stop();
  run.kv_samples = sampler.samples();

  const TokenCounter counter = [&tokenizer](const std::string& text) {
    try {
      return static_cast<int>(tokenizer->encode(text).size());
    } catch (const std::exception&) {
      return 1;
    }
  };
  run.metrics = calculate_metrics(run.outputs, duration, percentiles, goodput, counter);
  int shown = 0;
  for (const RequestOutput& o : run.outputs) {
    if (o.success) continue;
    if (shown == 0) out << "Failed requests during benchmark run detected (capping to 10):\n";
    if (shown < 10) out << "Error " << shown << ": " << o.error << "\n";
    ++shown;
  }

  nlohmann::ordered_json& res = run.result;
  res["date"] = current_datetime();
  res["endpoint_type"] = cfg.backend;
  res["backend"] = cfg.backend;
  res["label"] = cfg.label ? nlohmann::ordered_json(*cfg.label) : nlohmann::ordered_json(nullptr);
  res["model_id"] = model_id;
  res["tokenizer_id"] = tokenizer_id;
  res["num_prompts"] = cfg.num_prompts;
  for (const auto& m : cfg.metadata) {
    const auto [k, v] = key_value(m, "metadata");
    res[k] = v;
  }
  res["request_rate"] = std::isinf(cfg.request_rate) ? nlohmann::ordered_json("inf") : nlohmann::ordered_json(cfg.request_rate);
  res["burstiness"] = cfg.burstiness;
  res["max_concurrency"] = cfg.max_concurrency ? nlohmann::ordered_json(*cfg.max_concurrency) : nlohmann::ordered_json(nullptr);
  const BenchmarkMetrics& m = run.metrics;
  res["duration"] = duration;
  res["completed"] = m.completed;
  res["failed"] = m.failed;
  res["total_input_tokens"] = m.total_input;
  res["total_output_tokens"] = m.total_output;
  res["request_throughput"] = m.request_throughput;
  res["request_goodput"] = goodput.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(m.request_goodput);
  res["output_throughput"] = m.output_throughput;
  res["total_token_throughput"] = m.total_token_throughput;
  auto per_request = [&](auto f) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const RequestOutput& o : run.outputs) a.push_back(f(o));
    return a;
  };
  res["input_lens"] = per_request([](const RequestOutput& o) { return o.prompt_len; });
  res["output_lens"] = m.actual_output_lens;
  res["ttfts"] = per_request([](const RequestOutput& o) { return o.ttft; });
  res["itls"] = per_request([](const RequestOutput& o) { return o.itl; });
  res["latencies"] = per_request([](const RequestOutput& o) { return o.latency; });
  res["start_times"] = per_request([](const RequestOutput& o) { return o.start_time; });
  res["queue_times"] = per_request([](const RequestOutput& o) { return o.client_queue_time; });
  res["generated_texts"] = per_request([](const RequestOutput& o) { return o.generated_text; });
  res["errors"] = per_request([](const RequestOutput& o) { return o.error; });
  res["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  res["max_concurrent_requests"] = m.max_concurrent_requests;
  res["rtfx"] = 0.0;

  TableOptions topts;
  topts.duration_s = duration;
  topts.max_concurrency = cfg.max_concurrency;
  topts.request_rate = cfg.request_rate;
  topts.goodput = !goodput.empty();
  topts.percentile_metrics = selected_metrics;
  topts.percentiles = percentiles;
  for (const RequestOutput& o : run.outputs) {
    if (!o.success) continue;
    topts.client_queue_times.push_back(o.client_queue_time);
    topts.e2els_including_queue.push_back(o.latency + o.client_queue_time);
  }
  format_result_table(m, topts, run.table, res);
  const auto peak = sampler.peak();
  if (peak) {
    run.table += fmt::format("Peak KV cache usage: {:.1f}%\n", *peak * 100.0);
  } else {
    run.table += "Peak KV cache usage: n/a (no vllm:kv_cache_usage_perc in /metrics)\n";
  }
  res["peak_kv_cache_usage"] = peak ? nlohmann::ordered_json(*peak) : nlohmann::ordered_json(nullptr);
  out << run.table;
  out.flush();

  if (cfg.save_detailed) {
    nlohmann::ordered_json kv = nlohmann::ordered_json::array();
    for (const auto& s : run.kv_samples) kv.push_back({s.time - start, s.usage});
    res["kv_cache_usage_samples"] = kv;
  } else {
    for (const char* k : {"input_lens", "output_lens", "start_times", "ttfts", "itls", "generated_texts", "errors"}) res.erase(k);
  }

  if (cfg.plot) {
    PlotData pd;
    pd.t0 = start;
    pd.outputs = run.outputs;
    pd.kv_samples = run.kv_samples;
    pd.title = fmt::format("fp4serve bench serve: {} prompts, {} in / {} out, model {}", cfg.num_prompts, ds.input_len,
                           ds.output_len, sent_model);
    std::ofstream f(*cfg.plot, std::ios::binary);
    if (!f) throw BenchConfigError("cannot write the plot to " + *cfg.plot);
    f << render_svg_plot(pd);
    out << "Plot written to " << *cfg.plot << "\n";
  }

  if (cfg.save_result || cfg.append_result) {
    const std::string label = cfg.label.value_or(cfg.backend);
    std::string base_model_id = model_id.substr(model_id.find_last_of('/') == std::string::npos ? 0 : model_id.find_last_of('/') + 1);
    std::string file = cfg.result_filename.value_or(
        fmt::format("{}-{}qps{}-{}-{}.json", label, python_float_str(cfg.request_rate),
                    cfg.max_concurrency ? fmt::format("-concurrency{}", *cfg.max_concurrency) : "", base_model_id,
                    res["date"].get<std::string>()));
    if (cfg.result_dir) {
      std::filesystem::create_directories(*cfg.result_dir);
      file = (std::filesystem::path(*cfg.result_dir) / file).string();
    }
    std::ofstream f(file, cfg.append_result ? std::ios::app : std::ios::trunc);
    if (!f) throw BenchConfigError("cannot write the result to " + file);
    if (cfg.append_result && f.tellp() != 0) f << "\n";
    f << res.dump();
    run.result_file = file;
  }
  return run;
}

}  // namespace fp4serve::tools::bench
