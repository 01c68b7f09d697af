// Prometheus text exposition format 0.0.4, written the way Python's prometheus_client writes it
// (vLLM's /metrics is prometheus_client.generate_latest): "# HELP"/"# TYPE" per family, label
// pairs sorted by name, values in Go float form ("0.0", "1e+06", "+Inf"), counters as
// `<name>_total`, and the `<name>_created` timestamps of counters and histograms as their own
// gauge families right after them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4serve::server::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

// prometheus_client's floatToGoString: Python repr, except "+Inf"/"-Inf"/"NaN" and exponent form
// for positive values with more than 6 integer digits ("1234567.0" -> "1.234567e+06").
std::string go_float_string(double value);

// Label value escaping (backslash, double quote, newline) and HELP escaping (backslash, newline).
std::string escape_label_value(std::string_view value);
std::string escape_help(std::string_view help);

class PrometheusTextWriter {
 public:
  // created_unix_seconds: the creation time stamped on `_created` series; negative = omit them
  // (prometheus_client's disable_created_metrics()).
  explicit PrometheusTextWriter(double created_unix_seconds) : created_(created_unix_seconds) {}

  struct Sample {
    Labels labels;
    double value = 0.0;
  };
  struct HistogramSample {
    Labels labels;
    std::span<const double> upper_bounds;       // ascending, +Inf implicit
    std::span<const std::uint64_t> counts;      // per bucket, not cumulative; size = bounds + 1
    double sum = 0.0;
  };

  void gauge(std::string_view name, std::string_view help, const std::vector<Sample>& samples);
  // `name` without the `_total` suffix, as the counter was declared (vllm:prompt_tokens).
  void counter(std::string_view name, std::string_view help, const std::vector<Sample>& samples);
  // A collector-style counter without `_created` (process_cpu_seconds_total).
  void plain_counter(std::string_view name, std::string_view help, const std::vector<Sample>& samples);
  void histogram(std::string_view name, std::string_view help, const std::vector<HistogramSample>& samples);

  const std::string& text() const { return out_; }

 private:
  void header(std::string_view name, std::string_view help, std::string_view type);
  void line(std::string_view name, Labels labels, double value);
  void created_family(std::string_view base, std::string_view help, const std::vector<Labels>& label_sets);

  double created_;
  std::string out_;
};

}  // namespace fp4serve::server::metrics
