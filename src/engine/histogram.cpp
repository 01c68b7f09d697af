#include "engine/histogram.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fp4serve::engine {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  // Prometheus buckets are "le": a value equal to a bound belongs to that bound's bucket.
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += value;
}

std::vector<double> ttft_buckets_seconds() {
  return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
}

std::vector<double> inter_token_buckets_seconds() {
  return {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
}

std::vector<double> request_latency_buckets_seconds() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,  2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

std::vector<double> iteration_tokens_buckets() {
  return {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
}

std::vector<double> step_duration_buckets_seconds() {
  std::vector<double> out;
  for (int k = -48; k <= 28; ++k) out.push_back(std::exp2(k / 4.0));
  return out;
}

std::vector<double> one_two_five_buckets(double max_value) {
  std::vector<double> out;
  for (double exponent = 1;; exponent *= 10) {
    for (double mantissa : {1.0, 2.0, 5.0}) {
      const double value = mantissa * exponent;
      if (value > max_value) return out;
      out.push_back(value);
    }
  }
}

}  // namespace fp4serve::engine
