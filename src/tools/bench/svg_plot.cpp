#include "tools/bench/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace fp4serve::tools::bench {
namespace {

struct Box {
  double x, y, w, h;  // the plotting area inside a panel
};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

// A "nice" upper bound for an axis: 1, 2, 2.5 or 5 times a power of ten.
double nice_max(double v) {
  if (!(v > 0)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10.0 * p;
}

std::string fmt_tick(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e9) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}

// Frame, title, axis labels and 5 ticks on each axis.
void axes(std::string& s, const Box& b, const std::string& title, const std::string& xlabel, const std::string& ylabel,
          double xmax, double ymax) {
  s += fmt::format(R"~(<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#888"/>)~" "\n", b.x, b.y, b.w, b.h);
  s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="middle" font-size="14" font-weight="bold">{}</text>)~" "\n",
                   b.x + b.w / 2, b.y - 12, escape(title));
  s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="middle" font-size="12">{}</text>)~" "\n", b.x + b.w / 2,
                   b.y + b.h + 34, escape(xlabel));
  s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="middle" font-size="12" transform="rotate(-90 {} {})">{}</text>)~" "\n",
                   b.x - 46, b.y + b.h / 2, b.x - 46, b.y + b.h / 2, escape(ylabel));
  for (int i = 0; i <= 4; ++i) {
    const double fx = b.x + b.w * i / 4.0;
    const double fy = b.y + b.h - b.h * i / 4.0;
    s += fmt::format(R"~(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#eee"/>)~" "\n", b.x, fy, b.x + b.w, fy);
    s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="middle" font-size="10">{}</text>)~" "\n", fx, b.y + b.h + 14,
                     fmt_tick(xmax * i / 4.0));
    s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="end" font-size="10">{}</text>)~" "\n", b.x - 4, fy + 3,
                     fmt_tick(ymax * i / 4.0));
  }
}

void line_chart(std::string& s, const Box& b, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<std::pair<double, double>>& pts, double xmax_hint,
                double ymax_hint, const std::string& color) {
  double xmax = xmax_hint, ymax = ymax_hint;
  for (const auto& [x, y] : pts) {
    xmax = std::max(xmax, x);
    ymax = std::max(ymax, y);
  }
  xmax = nice_max(xmax);
  ymax = nice_max(ymax);
  axes(s, b, title, xlabel, ylabel, xmax, ymax);
  if (pts.empty()) {
    s += fmt::format(R"~(<text x="{}" y="{}" text-anchor="middle" font-size="12" fill="#999">no data</text>)~" "\n",
                     b.x + b.w / 2, b.y + b.h / 2);
    return;
  }
  std::string path;
  for (const auto& [x, y] : pts) {
    path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", b.x + b.w * x / xmax, b.y + b.h - b.h * y / ymax);
  }
  s += fmt::format(R"~(<path d="{}" fill="none" stroke="{}" stroke-width="1.5"/>)~" "\n", path, color);
}

void histogram(std::string& s, const Box& b, const std::string& title, const std::string& xlabel,
               const std::vector<double>& values_ms, const std::string& color) {
  constexpr int kBins = 40;
  double vmax = 0;
  for (double v : values_ms) vmax = std::max(vmax, v);
  const double xmax = nice_max(vmax);
  std::vector<double> counts(kBins, 0.0);
  for (double v : values_ms) counts[std::min(kBins - 1, static_cast<int>(v / xmax * kBins))] += 1.0;
  const double ymax = nice_max(*std::max_element(counts.begin(), counts.end()));
  axes(s, b, title + fmt::format(" (n={})", values_ms.size()), xlabel, "count", xmax, ymax);
  const double bw = b.w / kBins;
  for (int i = 0; i < kBins; ++i) {
    if (counts[i] == 0) continue;
    const double h = b.h * counts[i] / ymax;
    s += fmt::format(R"~(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"/>)~" "\n", b.x + i * bw,
                     b.y + b.h - h, std::max(bw - 1, 0.5), h, color);
  }
}

}  // namespace

std::string render_svg_plot(const PlotData& d) {
  // Token arrival times (request start + ttft + cumulative itl), as vLLM builds its peak data.
  std::vector<double> token_times, ttfts_ms, itls_ms;
  double end = 0;
  for (const RequestOutput& o : d.outputs) {
    if (!o.success) continue;
    double t = o.start_time + o.ttft - d.t0;
    token_times.push_back(t);
    for (double x : o.itl) token_times.push_back(t += x);
    ttfts_ms.push_back(o.ttft * 1000);
    for (double x : o.itl) itls_ms.push_back(x * 1000);
    end = std::max(end, t);
  }
  for (const auto& k : d.kv_samples) end = std::max(end, k.time - d.t0);
  // About 60 buckets over the run, at least 0.5 s wide (one bucket spans several decode steps).
  const double bucket = std::max(0.5, end / 60.0);
  const auto nb = static_cast<std::size_t>(std::ceil(end / bucket)) + 1;
  std::vector<double> counts(nb, 0.0);
  for (double t : token_times) {
    if (t >= 0) counts[std::min(nb - 1, static_cast<std::size_t>(t / bucket))] += 1.0;
  }
  std::vector<std::pair<double, double>> tput, kv;
  for (std::size_t i = 0; i < nb && !token_times.empty(); ++i) tput.emplace_back((i + 0.5) * bucket, counts[i] / bucket);
  for (const auto& k : d.kv_samples) kv.emplace_back(std::max(0.0, k.time - d.t0), k.usage * 100.0);

  const double W = 1000, H = 720;
  std::string s = fmt::format(
      R"~(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif">)~" "\n",
      W, H, W, H);
  s += fmt::format(R"~(<rect width="{}" height="{}" fill="#fafafa"/>)~" "\n", W, H);
  s += fmt::format(R"~(<text x="{}" y="24" text-anchor="middle" font-size="16">{}</text>)~" "\n", W / 2, escape(d.title));
  // Both time axes share one scale so the two curves line up.
  const double tmax = nb * bucket;
  line_chart(s, {70, 70, 390, 230}, "Output tokens/s", "time (s)", "tokens/s", tput, tmax, 1.0, "#1f77b4");
  line_chart(s, {570, 70, 390, 230}, "KV cache usage", "time (s)", "% of blocks", kv, tmax, 1.0, "#d62728");
  histogram(s, {70, 420, 390, 230}, "TTFT", "ms", ttfts_ms, "#2ca02c");
  histogram(s, {570, 420, 390, 230}, "ITL", "ms", itls_ms, "#9467bd");
  s += "</svg>\n";
  return s;
}

}  // namespace fp4serve::tools::bench
