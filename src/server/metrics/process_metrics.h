// The process_* series Python's prometheus_client ProcessCollector puts at the top of vLLM's
// /metrics (single API server), read from /proc/self the same way.
#pragma once

#include <optional>

#include "server/metrics/prometheus_text.h"

namespace fp4serve::server::metrics {

struct ProcessMetrics {
  double virtual_memory_bytes = 0;
  double resident_memory_bytes = 0;
  double start_time_seconds = 0;  // unix time
  double cpu_seconds_total = 0;   // user + system
  std::optional<double> open_fds;
  std::optional<double> max_fds;  // soft RLIMIT_NOFILE
};

// nullopt where /proc is not readable (prometheus_client then exposes nothing for them).
std::optional<ProcessMetrics> read_process_metrics();

// HELP/TYPE/sample lines in ProcessCollector's order and wording (no labels).
void write_process_metrics(const ProcessMetrics& metrics, PrometheusTextWriter& writer);

}  // namespace fp4serve::server::metrics
