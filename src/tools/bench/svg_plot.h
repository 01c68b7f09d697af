// `--plot FILE.svg`: one self-contained SVG (no scripts, no fonts to fetch) with four panels:
// output tokens/s over time, KV-cache usage over time, and the TTFT and ITL distributions.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/kv_usage_sampler.h"
#include "tools/bench/request_func.h"

namespace fp4serve::tools::bench {

struct PlotData {
  double t0 = 0.0;  // perf_counter() of the benchmark start; times are drawn relative to it
  std::vector<RequestOutput> outputs;
  std::vector<KvUsageSample> kv_samples;
  std::string title;
};

std::string render_svg_plot(const PlotData& data);

}  // namespace fp4serve::tools::bench
