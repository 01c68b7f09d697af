#include "server/metrics/prometheus_text.h"

#include <algorithm>
#include <cmath>

#include "engine/sampling_params.h"  // engine::python_float_repr

namespace fp4serve::server::metrics {

std::string go_float_string(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  const std::string s = engine::python_float_repr(value);
  const std::size_t dot = s.find('.');
  // Go switches to exponent form sooner than Python (prometheus_client only handles d > 0).
  if (value > 0 && dot != std::string::npos && dot > 6) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.')) mantissa.pop_back();
    return mantissa + "e+0" + std::to_string(dot - 1);
  }
  return s;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (const char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PrometheusTextWriter::header(std::string_view name, std::string_view help, std::string_view type) {
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += escape_help(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type;
  out_ += '\n';
}

void PrometheusTextWriter::line(std::string_view name, Labels labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    std::sort(labels.begin(), labels.end());
    out_ += '{';
    for (std::size_t i = 0; i < labels.size(); ++i) {
      if (i) out_ += ',';
      out_ += labels[i].first;
      out_ += "=\"";
      out_ += escape_label_value(labels[i].second);
      out_ += '"';
    }
    out_ += '}';
  }
  out_ += ' ';
  out_ += go_float_string(value);
  out_ += '\n';
}

void PrometheusTextWriter::created_family(std::string_view base, std::string_view help,
                                          const std::vector<Labels>& label_sets) {
  if (created_ < 0 || label_sets.empty()) return;
  const std::string name = std::string(base) + "_created";
  header(name, help, "gauge");
  for (const auto& labels : label_sets) line(name, labels, created_);
}

void PrometheusTextWriter::gauge(std::string_view name, std::string_view help, const std::vector<Sample>& samples) {
  header(name, help, "gauge");
  for (const auto& s : samples) line(name, s.labels, s.value);
}

void PrometheusTextWriter::counter(std::string_view name, std::string_view help, const std::vector<Sample>& samples) {
  const std::string total = std::string(name) + "_total";
  header(total, help, "counter");
  std::vector<Labels> label_sets;
  for (const auto& s : samples) {
    line(total, s.labels, s.value);
    label_sets.push_back(s.labels);
  }
  created_family(name, help, label_sets);
}

void PrometheusTextWriter::plain_counter(std::string_view name, std::string_view help,
                                         const std::vector<Sample>& samples) {
  header(name, help, "counter");
  for (const auto& s : samples) line(name, s.labels, s.value);
}

void PrometheusTextWriter::histogram(std::string_view name, std::string_view help,
                                     const std::vector<HistogramSample>& samples) {
  header(name, help, "histogram");
  const std::string bucket = std::string(name) + "_bucket";
  std::vector<Labels> label_sets;
  for (const auto& s : samples) {
    // Buckets are cumulative on the wire: le="x" counts every observation <= x.
    double cumulative = 0.0;
    for (std::size_t i = 0; i <= s.upper_bounds.size(); ++i) {
      cumulative += i < s.counts.size() ? static_cast<double>(s.counts[i]) : 0.0;
      Labels labels = s.labels;
      labels.emplace_back("le", i < s.upper_bounds.size() ? go_float_string(s.upper_bounds[i]) : "+Inf");
      line(bucket, std::move(labels), cumulative);
    }
    line(std::string(name) + "_count", s.labels, cumulative);
    line(std::string(name) + "_sum", s.labels, s.sum);
    label_sets.push_back(s.labels);
  }
  created_family(name, help, label_sets);
}

}  // namespace fp4serve::server::metrics
