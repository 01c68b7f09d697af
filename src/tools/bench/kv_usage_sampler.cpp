#include "tools/bench/kv_usage_sampler.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <sstream>

#include "tools/bench/request_func.h"

namespace fp4serve::tools::bench {

std::optional<double> parse_kv_cache_usage(const std::string& text) {
  static const std::string kName = "vllm:kv_cache_usage_perc";
  std::optional<double> best;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kName, 0) != 0) continue;
    const char next = line.size() > kName.size() ? line[kName.size()] : '\0';
    if (next != '{' && next != ' ') continue;  // another series with this prefix
    // The value follows the label set (labels may contain spaces inside quotes).
    std::size_t value_at = kName.size();
    if (next == '{') {
      const auto close = line.rfind('}');
      if (close == std::string::npos) continue;
      value_at = close + 1;
    }
    const char* begin = line.c_str() + value_at;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) continue;
    best = best ? std::max(*best, v) : v;
  }
  return best;
}

KvUsageSampler::KvUsageSampler(BaseUrl base, HeaderMap headers, double interval_s)
    : base_(std::move(base)), headers_(std::move(headers)), interval_s_(interval_s) {}

KvUsageSampler::~KvUsageSampler() { stop(); }

void KvUsageSampler::start() {
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void KvUsageSampler::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  sample_once();
}

void KvUsageSampler::sample_once() {
  try {
    const HttpResponse r = http_get(base_, "/metrics", headers_);
    if (r.status != 200) return;
    if (const auto v = parse_kv_cache_usage(r.body)) {
      std::lock_guard lock(mu_);
      samples_.push_back({perf_counter(), *v});
    }
  } catch (const std::exception&) {
    // no /metrics: no samples
  }
}

void KvUsageSampler::loop() {
  while (true) {
    sample_once();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::chrono::duration<double>(interval_s_), [this] { return stopping_; })) return;
  }
}

std::vector<KvUsageSample> KvUsageSampler::samples() const {
  std::lock_guard lock(mu_);
  return samples_;
}

std::optional<double> KvUsageSampler::peak() const {
  std::lock_guard lock(mu_);
  std::optional<double> best;
  for (const auto& s : samples_) best = best ? std::max(*best, s.usage) : s.usage;
  return best;
}

}  // namespace fp4serve::tools::bench
