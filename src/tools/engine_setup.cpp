#include "tools/engine_setup.h"
#include "tools/speculative_config.h"
#include "tools/kv_events_flag.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "tokenizer/tokenizer_files.h"
#include "tools/device_choice.h"
#include "tools/gpu_memory_setup.h"
#include "tools/weight_cache_setup.h"

#include <nlohmann/json.hpp>

namespace fp4serve::tools {
namespace {

// MemAvailable from /proc/meminfo, 0 when unknown.
uint64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit) {
    if (key == "MemAvailable:") return kb * 1024;
  }
  return 0;
}

std::shared_ptr<const tokenizer::Tokenizer> load_tokenizer(const std::filesystem::path& where) {
  for (const char* f : {"tokenizer.json", "tokenizer.json.gz"}) {
    if (std::filesystem::exists(where / f)) return tokenizer::Tokenizer::load(where);
  }
  if (std::filesystem::is_regular_file(where)) return tokenizer::Tokenizer::load(where);
  throw std::runtime_error(fmt::format("no tokenizer.json in {}: give --tokenizer PATH", where.string()));
}

std::filesystem::path tokenizer_directory(const std::filesystem::path& where) {
  return std::filesystem::is_regular_file(where) ? where.parent_path() : where;
}

// tokenizer_config.json next to the tokenizer, or null.
nlohmann::json read_tokenizer_config(const std::filesystem::path& dir) {
  const auto path = dir / "tokenizer_config.json";
  if (!std::filesystem::exists(path)) return nullptr;
  try {
    return nlohmann::json::parse(tokenizer::read_maybe_gzipped(path));
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("{}: {}", path.string(), e.what()));
  }
}

// transformers' order: chat_template.jinja, then tokenizer_config.json's chat_template (a string,
// or a list of {name, template} where "default" is used).
std::string find_chat_template(const std::filesystem::path& dir, const nlohmann::json& config) {
  if (std::filesystem::exists(dir / "chat_template.jinja")) return tokenizer::read_maybe_gzipped(dir / "chat_template.jinja");
  if (!config.is_object() || !config.contains("chat_template")) return "";
  const auto& t = config["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& e : t)
      if (e.value("name", "") == "default") return e.value("template", "");
  }
  return "";
}

}  // namespace

void add_engine_flags(CLI::App& cmd, EngineFlags& f) {
  cmd.add_option("--tokenizer", f.tokenizer, "tokenizer.json or its directory (default: the model directory)");
  cmd.add_option("--max-model-len", f.max_model_len, "context length (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-num-seqs", f.max_num_seqs, "most sequences running at once (default: what the cache holds)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "token budget of one engine step")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--kv-cache-memory,--kv-cache-memory-bytes", f.kv_cache_memory,
                 "bytes for KV cache + GDN state slots + snapshots, e.g. 4GiB (default: on the CPU 25% of free RAM, "
                 "256MiB..8GiB; on a GPU what --gpu-memory-utilization leaves after weights and activations)");
  add_device_flag(cmd, f.device);
  cmd.add_option("--gpu-memory-utilization", f.gpu_memory_utilization,
                 "fraction of the GPU's total memory for weights + activations + KV cache + GDN state (default 0.9; "
                 "GPU only: refused on the CPU)");
  cmd.add_option("--kv-cache-dtype", f.kv_cache_dtype, "auto|bfloat16|fp8|fp8_e4m3 (auto: the checkpoint's)");
  cmd.add_option("--block-size", f.block_size, "tokens per KV block")->check(CLI::PositiveNumber);
  cmd.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.enable_prefix_caching,
               "reuse KV and GDN state of shared prefixes (default on)");
  cmd.add_option("--prefix-snapshot-interval", f.snapshot_interval,
                 "GDN state snapshot every N tokens for prefix hits (multiple of --block-size)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--num-gpu-blocks-override", f.num_gpu_blocks_override, "use at most this many KV blocks (testing)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--seed", f.seed, "seed of the generator for unseeded requests");
  cmd.add_option("--threads", f.threads, "CPU threads (default: all cores)")->check(CLI::PositiveNumber);
  add_model_source_flags(cmd, f.source);
  cmd.add_flag("!--no-weight-cache", f.weight_cache,
               "pack the CPU weights at every start instead of mapping them from the packed-weight cache file "
               "written next to the model at the first start");
  cmd.add_option("--speculative-config", f.speculative_config,
                 "speculative decoding, vLLM's JSON: '{\"method\": \"mtp\", \"num_speculative_tokens\": N}' "
                 "(the checkpoint's MTP layer drafts, the model verifies)");
  add_kv_events_flag(cmd, f.kv_events_config);
}

uint64_t parse_byte_size(const std::string& text, const std::string& flag) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("{}: '{}' is not a size (examples: 4GiB, 512MB, 1073741824)", flag, text));
  }
  std::string unit = text.substr(pos);
  unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }), unit.end());
  for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double mult = 1;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kb" || unit == "kib") mult = 1024.0;
  else if (unit == "m" || unit == "mb" || unit == "mib") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gb" || unit == "gib") mult = 1024.0 * 1024 * 1024;
  else if (unit == "t" || unit == "tb" || unit == "tib") mult = 1024.0 * 1024 * 1024 * 1024;
  else throw std::runtime_error(fmt::format("{}: unknown unit '{}' in '{}'", flag, unit, text));
  if (value <= 0) throw std::runtime_error(fmt::format("{}: '{}' must be positive", flag, text));
  return static_cast<uint64_t>(value * mult);
}

ServingModel load_serving_model(const std::string& model_path, const EngineFlags& f, StartupPhases* phases,
                                const VisionChoice& vision, bool weights) {
  ServingModel s;
  StartupPhases own;
  StartupPhases& ph = phases ? *phases : own;
  if (f.threads > 0) kernels::cpu::set_num_threads(f.threads);
  const std::string dir = resolve_model_dir(model_path, f.source);
  // The device first: --device cuda without a usable GPU fails here, before any weight is read.
  DeviceChoice device = choose_device(f.device, probe_cuda());
  ph.mark(dir == model_path ? "locate" : "locate/download");
  // Headers, configs and the plan check; the weights' pages are read below only when they will be
  // packed (a weight-cache hit never reads the packed linears from the checkpoint).
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir, LoadOptions{"main", false, true}));
  s.checkpoint = ck;
  // The chosen backend (the CPU at this machine's best tier, FP4SERVE_CPU_ISA caps it; or the CUDA
  // device); the model co-owns it. A front-end that loads no weights creates none (no CUDA context
  // in the server process: the engine process makes its own).
  std::shared_ptr<kernels::Backend> backend;
  if (weights) backend = make_backend(device, f.device == "auto");
  s.decisions.push_back(device.log_line);
  const bool on_gpu = weights && device.kind == DeviceKind::kCuda;
  if (on_gpu) {
    // A checkpoint bigger than the memory the utilization allows is refused before its load.
    const DeviceMemory dm = device_memory(*backend);
    check_weights_fit(dm.name, dm.total_bytes, parse_gpu_memory_utilization(f.gpu_memory_utilization),
                      ck->file_bytes(), !f.kv_cache_memory.empty());
    if (f.weight_cache) s.decisions.push_back("Weight cache: not used on the GPU (the packed-panel cache is the CPU's)");
  }
  const SpeculativeSettings spec =
      f.speculative_config.empty() ? SpeculativeSettings{} : parse_speculative_config(f.speculative_config);
  if (spec.enabled && !ck->has_mtp())
    throw std::runtime_error("--speculative-config: MTP speculative decoding is unavailable: " +
                             ck->mtp_unavailable_reason());
  bool cache_hit = false;
  auto* cpu = dynamic_cast<kernels::cpu::CpuBackend*>(backend.get());  // null on the GPU
  if (weights && cpu && f.weight_cache && cpu->packs_weights()) {
    const auto file = weight_cache_file(ck->directory(), kernels::cpu::isa_name(cpu->isa()));
    const uint64_t free_bytes = free_bytes_for(file);
    // The MTP layer's panels follow the model's when it is bound: a different set of entries.
    cache_hit = cpu->use_weight_cache(file, checkpoint_identity(*ck) + (spec.enabled ? "|mtp" : ""));
    if (!cache_hit && free_bytes < ck->file_bytes() + (uint64_t{1} << 30)) {
      // Too little room for a copy of the weights: pack as before and say why nothing is written.
      auto fresh = std::make_shared<kernels::cpu::CpuBackend>(kernels::cpu::active_isa());
      cpu = fresh.get();
      backend = std::move(fresh);
      s.decisions.push_back(fmt::format("Weight cache: not written to {}: {:.1f} GB free, the packed weights need "
                                        "about {:.1f} GB",
                                        file.string(), static_cast<double>(free_bytes) / 1e9,
                                        static_cast<double>(ck->file_bytes()) / 1e9));
    }
  }
  if (weights) {
    if (!cache_hit) ck->touch_weight_pages(true);
    ph.mark("load");
    expect_weight_bytes(*backend, planned_weight_bytes(*ck, spec.enabled));
    auto model = std::make_shared<model::Qwen35MoeModel>(ck, backend);
    if (spec.enabled) model->bind_mtp();
    s.model = model;
    if (const std::string line = cpu ? cpu->finish_weight_cache() : std::string(); !line.empty())
      s.decisions.push_back(line);
    ph.mark(cache_hit ? "map weights" : "pack weights");
  }
  const std::filesystem::path tok_path = f.tokenizer.empty() ? ck->directory() : std::filesystem::path(f.tokenizer);
  s.tokenizer = load_tokenizer(tok_path);
  s.tokenizer_dir = tokenizer_directory(tok_path).string();
  const nlohmann::json tok_config = read_tokenizer_config(s.tokenizer_dir);
  s.chat_template = find_chat_template(s.tokenizer_dir, tok_config);
  ph.mark("tokenizer");
  if (weights) s.vision = load_serving_vision(ck, backend, vision, s.decisions);
  if (s.vision) ph.mark("vision tower");
  engine::EngineConfig& c = s.config;
  c.vision_encoder = s.vision;
  const ModelConfig& mc = ck->config();
  c.max_model_len = f.max_model_len > 0 ? f.max_model_len : static_cast<int>(mc.max_position_embeddings);
  if (f.max_model_len > mc.max_position_embeddings)
    throw std::runtime_error(fmt::format(
        "--max-model-len {} is larger than the model's max_position_embeddings {} (config.json)", f.max_model_len,
        mc.max_position_embeddings));
  c.max_num_seqs = f.max_num_seqs;
  c.max_num_batched_tokens = f.max_num_batched_tokens;
  c.block_size = f.block_size;
  c.enable_prefix_caching = f.enable_prefix_caching;
  c.snapshot_interval = f.snapshot_interval;
  c.num_kv_blocks_override = f.num_gpu_blocks_override;
  c.seed = f.seed;
  c.kv_events = parse_kv_events_config(f.kv_events_config);
  if (const std::string line = kv_events_decision(c.kv_events); !line.empty()) s.decisions.push_back(line);
  if (spec.enabled) {
    c.mtp = true;
    c.num_speculative_tokens = spec.num_speculative_tokens;
    s.decisions.push_back(spec.decision);
  }
  if (device.kind == DeviceKind::kCuda) {
    // vLLM's memory plan (gpu_memory_plan.h, below; in the engine process when this front-end loads
    // no weights): the cache budget is what the utilization leaves, or --kv-cache-memory-bytes.
    if (!f.kv_cache_memory.empty()) c.cache_memory_bytes = parse_byte_size(f.kv_cache_memory, "--kv-cache-memory-bytes");
  } else if (f.kv_cache_memory.empty()) {
    const uint64_t avail = mem_available_bytes();
    const uint64_t lo = 256ull << 20, hi = 8ull << 30;
    c.cache_memory_bytes = std::clamp<uint64_t>(avail / 4, lo, hi);
    s.decisions.push_back(fmt::format("--kv-cache-memory not given: using {} MiB (25% of {} MiB available, within "
                                      "256 MiB..8 GiB)",
                                      c.cache_memory_bytes >> 20, avail >> 20));
  } else {
    c.cache_memory_bytes = parse_byte_size(f.kv_cache_memory, "--kv-cache-memory");
  }
  const bool ckpt_fp8_kv = ck->quant_config().kv_cache() == KvCacheQuant::kFP8;
  if (f.kv_cache_dtype == "auto") {
    c.kv_dtype = ckpt_fp8_kv ? kernels::KvDtype::kFp8E4M3 : kernels::KvDtype::kBf16;
    s.decisions.push_back(ckpt_fp8_kv ? "--kv-cache-dtype auto: fp8_e4m3, as the checkpoint's kv_cache_quant_algo says"
                                      : "--kv-cache-dtype auto: bfloat16 (the model dtype)");
  } else if (f.kv_cache_dtype == "fp8" || f.kv_cache_dtype == "fp8_e4m3") {
    c.kv_dtype = kernels::KvDtype::kFp8E4M3;
    if (!ckpt_fp8_kv)
      s.decisions.push_back("--kv-cache-dtype fp8 on a checkpoint without KV scales: k_scale = v_scale = 1.0 (vLLM)");
  } else if (f.kv_cache_dtype == "bfloat16" || f.kv_cache_dtype == "bf16") {
    c.kv_dtype = kernels::KvDtype::kBf16;
  } else {
    throw std::runtime_error(fmt::format(
        "--kv-cache-dtype {} is not supported: use auto, bfloat16, fp8 or fp8_e4m3 (fp8_e5m2 and nvfp4 KV caches "
        "are not implemented on the CPU backend)",
        f.kv_cache_dtype));
  }
  // EOS: the tokenizer's eos token (vLLM's request.eos_token_id) and generation_config's list.
  const auto& gen = ck->generation_config().eos_token_ids;
  c.generation_eos_token_ids = gen.empty() ? mc.eos_token_ids : gen;
  std::string eos_token;
  if (tok_config.is_object() && tok_config.contains("eos_token")) {
    const auto& e = tok_config["eos_token"];
    eos_token = e.is_string() ? e.get<std::string>() : e.is_object() ? e.value("content", "") : "";
  }
  if (const int32_t id = eos_token.empty() ? -1 : s.tokenizer->token_to_id(eos_token); id >= 0) c.eos_token_id = id;
  else if (!c.generation_eos_token_ids.empty()) c.eos_token_id = c.generation_eos_token_ids.front();
  if (on_gpu) {
    const GpuMemoryPlan plan = plan_device_memory(*s.model, f, c);
    s.decisions.insert(s.decisions.end(), plan.log_lines.begin(), plan.log_lines.end());
  }
  if (s.model) {
    s.decisions.push_back("Backend: " + s.model->backend().describe());
    s.decisions.push_back(s.model->backend().weights_summary());
  }
  return s;
}

}  // namespace fp4serve::tools
