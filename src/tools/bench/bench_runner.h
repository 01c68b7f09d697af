// The body of `fp4serve bench serve`, following main_async() and benchmark() of
// vllm/benchmarks/serve.py: resolve the model, build the random dataset, align it to the
// server's tokenizer, optional ready check and warm-ups, dispatch at --request-rate under
// --max-concurrency, compute the metrics, print the table and write the result JSON.
// Everything that is printed goes to `out`, so tests can read it.
#pragma once

#include <nlohmann/json.hpp>

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/bench/bench_config.h"
#include "tools/bench/bench_metrics.h"
#include "tools/bench/kv_usage_sampler.h"
#include "tools/bench/random_dataset.h"

namespace fp4serve::tools::bench {

class BenchConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BenchRun {
  nlohmann::ordered_json result;  // what --save-result writes
  BenchmarkMetrics metrics;
  std::vector<RequestOutput> outputs;
  std::vector<KvUsageSample> kv_samples;
  std::string table;               // the printed result block
  std::string result_file;         // empty unless saved
};

// Arrival offsets (seconds from the start) of vLLM's get_request: all 0 for an infinite rate,
// else gamma(shape=burstiness, scale=1/(rate*burstiness)) gaps, rescaled so the last is N/rate.
std::vector<double> arrival_offsets(std::size_t n, double request_rate, double burstiness, std::uint64_t seed);

BenchRun run_bench(const BenchConfig& cfg, std::ostream& out);

}  // namespace fp4serve::tools::bench
