// `fp4serve synth --preset qwen3.6-35b-a3b [--layers N] --format bf16|fp8|nvfp4|int4 [--seed S] OUT_DIR`
// writes a random-weight checkpoint shaped like the real release of that format (synth_writer.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <spdlog/spdlog.h>

#include "tools/commands.h"
#include "tools/synth_writer.h"

namespace fp4serve::tools {
namespace {

struct SynthArgs {
  std::string preset = "qwen3.6-35b-a3b";
  int64_t layers = -1;
  std::string format;
  uint64_t seed = 0;
  std::string out_dir;
  bool force = false;
  bool no_progress = false;
  bool no_mtp = false;
  bool no_vision = false;
};

// Files of a previous synth run that would otherwise mix with the new one (an old shard that the new
// index does not name is still picked up by some loaders).
bool is_checkpoint_file(const std::filesystem::path& p) {
  const std::string name = p.filename().string();
  return name.ends_with(".safetensors") || name == "model.safetensors.index.json" || name == "config.json" ||
         name == "generation_config.json" || name == "hf_quant_config.json" || name == "quantization_config.json" ||
         name.ends_with(".safetensors.tmp");
}

void prepare_out_dir(const std::filesystem::path& dir, bool force) {
  if (!std::filesystem::exists(dir)) return;
  if (!std::filesystem::is_directory(dir)) throw std::runtime_error(dir.string() + ": exists and is not a directory");
  std::vector<std::filesystem::path> old;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (is_checkpoint_file(entry.path())) old.push_back(entry.path());
  }
  if (old.empty()) return;
  if (!force) {
    throw std::runtime_error(dir.string() + ": already holds a checkpoint (" + old.front().filename().string() +
                             ", ...); pass --force to replace it");
  }
  for (const auto& p : old) std::filesystem::remove(p);
}

void run_synth(const SynthArgs& args) {
  synth::SynthOptions options;
  options.dims = synth::preset_dims(args.preset);
  if (args.layers >= 0) options.dims.num_hidden_layers = args.layers;
  const auto format = synth::parse_synth_format(args.format);
  if (!format) throw std::runtime_error("--format must be bf16, fp8, nvfp4 or int4, not '" + args.format + "'");
  options.format = *format;
  options.seed = args.seed;
  options.out_dir = args.out_dir;
  if (args.no_progress) options.progress = ByteProgress::Mode::kOff;
  options.mtp = !args.no_mtp;
  options.vision = !args.no_vision;
  prepare_out_dir(options.out_dir, args.force);

  const synth::SynthResult r = synth::synthesize(options);
  for (const auto& d : r.config_disagreements) {
    spdlog::warn("synth: quantization config and tensors disagree: {}", d);
  }
  std::printf("synth: %s %s, %lld layers, seed %llu -> %s\n", args.preset.c_str(), args.format.c_str(),
              static_cast<long long>(options.dims.num_hidden_layers), static_cast<unsigned long long>(args.seed),
              options.out_dir.c_str());
  for (const auto& f : r.files) {
    std::printf("  %-40s %10.3f GB\n", f.filename().c_str(),
                static_cast<double>(std::filesystem::file_size(f)) / 1e9);
  }
  std::printf("synth: %zu files, %zu tensors, %.3f GB in %.1f s (%.2f GB/s)\n", r.files.size(), r.tensor_count,
              static_cast<double>(r.file_bytes) / 1e9, r.seconds,
              r.seconds > 0 ? static_cast<double>(r.file_bytes) / 1e9 / r.seconds : 0.0);
}

}  // namespace

void register_synth(CLI::App& app) {
  auto args = std::make_shared<SynthArgs>();
  auto* cmd = app.add_subcommand("synth", "write a random-weight checkpoint with the real names, shapes and configs");
  cmd->add_option("--preset", args->preset, "model shape")
      ->check(CLI::IsMember(synth::preset_names()))
      ->capture_default_str();
  cmd->add_option("--layers", args->layers, "number of decoder layers (default: all of the preset's)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--format", args->format, "bf16 | fp8 (Qwen block FP8) | nvfp4 (ModelOpt) | int4 (AutoRound)")
      ->required()
      ->check(CLI::IsMember({"bf16", "fp8", "nvfp4", "int4"}));
  cmd->add_option("--seed", args->seed, "random seed (same seed, same bytes)")->capture_default_str();
  cmd->add_flag("--force", args->force, "replace a checkpoint already in OUT_DIR");
  cmd->add_flag("--no-progress", args->no_progress, "do not show progress");
  cmd->add_flag("--no-mtp", args->no_mtp, "leave out the MTP block (mtp.*), as some conversions do");
  cmd->add_flag("--no-vision", args->no_vision, "leave out the vision tower's tensors (model.visual.*)");
  cmd->add_option("OUT_DIR", args->out_dir, "directory to write")->required();
  cmd->callback([args] { run_synth(*args); });
}

}  // namespace fp4serve::tools
