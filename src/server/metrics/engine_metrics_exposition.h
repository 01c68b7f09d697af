// GET /metrics: engine::EngineStats as vLLM's PrometheusStatLogger exposes them (names, HELP
// texts, label set {model_name, engine}, family order of vllm/v1/metrics/loggers.py), preceded by
// the process_* series. Only series whose numbers EngineStats really holds are written; vLLM
// series we cannot back yet are listed in the task report, not faked.
#pragma once

#include <map>
#include <string>

#include "engine/engine_stats.h"

namespace fp4serve::server::metrics {

struct ExpositionConfig {
  std::string model_name;      // first --served-model-name
  std::string engine = "0";    // engine index label
  // vllm:cache_config_info labels (vLLM prints every CacheConfig field as str(); the caller fills
  // what we have: block_size, cache_dtype, enable_prefix_caching, gpu_memory_utilization,
  // num_gpu_blocks, ...). "engine" is added here. Empty map = no cache_config_info family.
  std::map<std::string, std::string> cache_config_info;
  // Unix time stamped on the *_created series (server start); negative leaves them out.
  double created_unix_seconds = -1.0;
  bool include_process_metrics = true;
  // fp4serve:engine_restarts_total (the engine runs in a supervised child process: restarts of it).
  bool engine_restarts = false;
};

std::string render_engine_metrics(const engine::EngineStats& stats, const ExpositionConfig& config);

// Content-Type of the 0.0.4 text format, as prometheus_client.CONTENT_TYPE_LATEST.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace fp4serve::server::metrics
