#include "tools/bench/vision_bench.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "kernels/backend.h"
#include "kernels/cpu/thread_pool.h"
#include "model/vision_loader.h"

namespace fp4serve::tools::bench {
namespace {

struct VisionBenchOptions {
  std::string model;
  int image_size = 1024;
  int iterations = 2;
  int threads = 0;
  bool fp32_attention = false;
};

// kB fields of /proc/self/status (VmRSS: resident now; VmHWM: peak since start or the last reset).
long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  return -1;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so that the next peak is the encode's own.
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

void run(const VisionBenchOptions& o) {
  if (o.threads > 0) kernels::cpu::set_num_threads(o.threads);
  kernels::Backend& backend = kernels::default_backend();
  const long rss0 = status_kb("VmRSS");
  const auto t0 = std::chrono::steady_clock::now();
  auto tower = model::load_vision_tower(std::filesystem::path(o.model), backend);
  if (!tower) throw std::runtime_error(o.model + ": no vision tower (no vision_config or no model.visual.* tensors)");
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const long rss_loaded = status_kb("VmRSS");
  if (o.fp32_attention) tower->set_attention_math(kernels::AttentionMath::kFp32);

  const auto& c = tower->config();
  const int unit = static_cast<int>(c.patch_size * c.spatial_merge_size);
  if (o.image_size % unit != 0)
    throw std::invalid_argument("--image-size must be a multiple of " + std::to_string(unit));
  vision::PixelPatches im;
  im.grid = {1, o.image_size / static_cast<int>(c.patch_size), o.image_size / static_cast<int>(c.patch_size)};
  im.patch_dim = static_cast<int>(c.patch_dim());
  im.values.resize(static_cast<size_t>(im.grid.num_patches() * im.patch_dim));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : im.values) v = nd(rng);

  std::printf("vision tower: depth %lld, hidden %lld, %lld heads, mlp %lld, out %lld; %s\n",
              static_cast<long long>(c.depth), static_cast<long long>(c.hidden_size),
              static_cast<long long>(c.num_heads), static_cast<long long>(c.intermediate_size),
              static_cast<long long>(c.out_hidden_size), backend.describe().c_str());
  std::printf("weights: %.1f MiB in the checkpoint; resident after load +%.1f MiB (%.1f s to load)\n",
              mib(static_cast<double>(tower->weight_bytes())), (rss_loaded - rss0) / 1024.0, load_s);
  std::printf("image %dx%d: grid %dx%d = %lld patches -> %lld LLM tokens; workspace %.1f MiB\n", o.image_size,
              o.image_size, im.grid.h, im.grid.w, static_cast<long long>(im.grid.num_patches()),
              static_cast<long long>(im.grid.num_llm_tokens(static_cast<int>(c.spatial_merge_size))),
              mib(static_cast<double>(tower->activation_bytes(im.grid.num_patches()))));
  double best = 1e30, total = 0;
  long peak_kb = 0;
  for (int i = 0; i < o.iterations; ++i) {
    reset_peak_rss();
    const long before = status_kb("VmRSS");
    const auto s = std::chrono::steady_clock::now();
    const auto features = tower->encode(im);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - s).count();
    peak_kb = std::max(peak_kb, status_kb("VmHWM") - before);
    best = std::min(best, sec);
    total += sec;
    std::printf("  encode %d: %.2f s (%zu features)\n", i + 1, sec, features.size());
  }
  std::printf("encode %dx%d: best %.2f s, mean %.2f s over %d; peak RSS during encode +%.1f MiB over the loaded "
              "tower\n",
              o.image_size, o.image_size, best, total / o.iterations, o.iterations, peak_kb / 1024.0);
}

}  // namespace

void add_bench_vision_command(CLI::App& bench) {
  auto o = std::make_shared<VisionBenchOptions>();
  auto* cmd = bench.add_subcommand("vision", "the vision tower's encode time and memory for one square image (CPU)");
  cmd->add_option("--model,-m", o->model, "model directory with config.json vision_config and model.visual.* tensors")
      ->required();
  cmd->add_option("--image-size", o->image_size, "image side in pixels (multiple of patch x merge)")
      ->capture_default_str()
      ->check(CLI::Range(32, 8192));
  cmd->add_option("--iterations", o->iterations, "timed encodes")->capture_default_str()->check(CLI::Range(1, 100));
  cmd->add_option("--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::PositiveNumber);
  cmd->add_flag("--fp32-attention", o->fp32_attention, "flash-like attention numerics instead of HF eager's");
  cmd->callback([o] { run(*o); });
}

}  // namespace fp4serve::tools::bench
