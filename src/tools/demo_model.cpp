#include "tools/demo_model.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include <spdlog/spdlog.h>

#include "tools/synth_preset.h"
#include "tools/synth_formats.h"
#include "tools/synth_writer.h"

namespace fp4serve::tools {
namespace {

namespace fs = std::filesystem;

fs::path cache_root() {
  if (const char* d = std::getenv("FP4SERVE_CACHE")) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME")) return fs::path(x) / "fp4serve";
  if (const char* h = std::getenv("HOME")) return fs::path(h) / ".cache" / "fp4serve";
  return fs::temp_directory_path() / "fp4serve";
}

// Where setup put the Qwen3.5/3.6 tokenizer: $FP4SERVE_TOKENIZER_DIR, else .cache/tokenizers/qwen3.5
// of the checkout the binary was built in (build/fp4serve -> ../.cache), else of the working directory.
fs::path find_tokenizer_dir() {
  std::vector<fs::path> candidates;
  if (const char* d = std::getenv("FP4SERVE_TOKENIZER_DIR")) candidates.emplace_back(d);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      candidates.push_back(p / ".cache" / "tokenizers" / "qwen3.5");
  }
  candidates.push_back(fs::current_path(ec) / ".cache" / "tokenizers" / "qwen3.5");
  for (const fs::path& c : candidates)
    if (fs::exists(c / "tokenizer.json") && fs::exists(c / "tokenizer_config.json")) return c;
  throw std::runtime_error(
      "the demo model needs the Qwen tokenizer files, which were not found (looked in $FP4SERVE_TOKENIZER_DIR and "
      ".cache/tokenizers/qwen3.5 of the checkout): run scripts/setup.sh or tools/reference/fetch_tokenizers.sh, or "
      "give a MODEL");
}

// What synth writes for the demo model changes between versions (the vision tower came in layout 2):
// a cached demo model of another layout is made again, so an upgrade never serves a stale one.
constexpr const char* kLayoutFile = ".fp4serve-demo-layout";
constexpr const char* kLayout = "2";

bool complete(const fs::path& dir) {
  if (!fs::exists(dir / "model.safetensors") || !fs::exists(dir / "tokenizer.json")) return false;
  std::ifstream in(dir / kLayoutFile);
  std::string layout;
  return static_cast<bool>(in >> layout) && layout == kLayout;
}

}  // namespace

std::string ensure_demo_model() {
  const fs::path dir = cache_root() / "demo-model";
  if (complete(dir)) return dir.string();
  const fs::path tok = find_tokenizer_dir();
  spdlog::info("No MODEL given: making the built-in demo model (random weights, real tokenizer) in {}", dir.string());
  // Per process: replicas started together on one cache each make their own and the first rename wins.
  const fs::path tmp = dir.string() + ".partial-" + std::to_string(::getpid());
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  synth::SynthOptions options;
  options.dims = synth::SynthDims::demo();
  options.format = synth::SynthFormat::kBF16;
  options.seed = 0;
  options.out_dir = tmp.string();
  options.progress = ByteProgress::Mode::kOff;
  synth::synthesize(options);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / f, tmp / f);
  std::ofstream(tmp / kLayoutFile) << kLayout << "\n";
  if (!complete(dir)) fs::remove_all(dir);  // a half-made one from an older layout or a crash
  std::error_code ec;
  fs::rename(tmp, dir, ec);  // atomic: a half-made demo model is never picked up
  if (ec) {
    // Renaming onto a non-empty directory fails: another process finished first; use its model.
    fs::remove_all(tmp);
    if (!complete(dir)) throw std::runtime_error("cannot make the demo model in " + dir.string() + ": " + ec.message());
  }
  return dir.string();
}

}  // namespace fp4serve::tools
