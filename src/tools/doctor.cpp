// `fp4serve doctor [MODEL] [serve flags]`: the preflight report. Answers before a start what an
// operator would otherwise find out by booting: what this machine is (CPU ISA, cores, memory, GPUs,
// driver, CUDA, cuDNN), which kernel runs each module of MODEL, what the cache holds for the given
// flags (computed, not allocated), and the verdict of every known-bad-configuration rule that
// serve enforces (preflight_checks.h). Exit 0 when nothing is refused, 1 otherwise.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "checkpoint/tensor_plan.h"
#include "checkpoint/weight_loader.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/weights.h"
#include "tools/commands.h"
#include "tools/device_choice.h"
#include "tools/gpu_memory_setup.h"
#include "tools/model_source.h"
#include "tools/doctor_host.h"
#include "tools/preflight_checks.h"
#include "tools/engine_process_flags.h"
#include "tools/serve_media_flags.h"
#include "tools/serve_transport_flags.h"

namespace fp4serve::tools {
namespace {

struct DoctorArgs {
  std::string model_positional;
  std::string model_flag;
  ServeSettings settings;
  TransportFlags transport;  // TLS, CORS, --root-path, --uds: checked as serve checks them
  MediaFlags media;          // --limit-mm-per-prompt, --allowed-local-media-path...: likewise
  EngineProcessFlags engine_process;  // --max-engine-restarts...: taken, nothing to check before start-up
  // serve flags that no rule reads: accepted so that a serve command line works unchanged.
  std::string ignored_text;
  std::vector<std::string> ignored_list;
  bool ignored_flag = false;
};

std::string gib(uint64_t b) { return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1ull << 30)); }
const char* yes_no(bool b) { return b ? "yes" : "no"; }

void print_cpu() {
  namespace cpu = kernels::cpu;
  const CpuReport c = probe_cpu();
  const cpu::CpuFeatures& f = cpu::cpu_features();
  std::printf("== CPU ==\n");
  std::printf("cpu: %s\n", c.model_name.c_str());
  std::printf("isa: avx2 %s, fma %s, f16c %s, avx512f %s, avx512bw %s, avx512vl %s, avx512dq %s, avx512_bf16 %s, "
              "amx_tile %s, amx_bf16 %s (amx permitted by the kernel: %s)\n",
              yes_no(f.avx2), yes_no(f.fma), yes_no(f.f16c), yes_no(f.avx512f), yes_no(f.avx512bw), yes_no(f.avx512vl),
              yes_no(f.avx512dq), yes_no(f.avx512_bf16), yes_no(f.amx_tile), yes_no(f.amx_bf16),
              yes_no(f.amx_permitted));
  std::string supported;
  for (cpu::Isa i : cpu::supported_isas()) supported += (supported.empty() ? "" : ", ") + std::string(cpu::isa_name(i));
  try {
    std::printf("kernel path: %s (this CPU supports: %s; FP4SERVE_CPU_ISA can lower it)\n",
                std::string(cpu::isa_name(cpu::active_isa())).c_str(), supported.c_str());
  } catch (const std::exception& e) {
    std::printf("kernel path: none: %s\n", e.what());
  }
  std::printf("cores: %d logical, %d kernel threads\n", c.logical_cores, cpu::num_threads());
}

void print_memory(const HostInfo& h) {
  std::printf("memory: total %s, available %s\n", gib(h.mem_total_bytes).c_str(), gib(h.mem_available_bytes).c_str());
}

void print_cuda(const HostInfo& h) {
  std::printf("== CUDA ==\n");
  const std::string backend = describe_cuda_backend();
  std::printf("CUDA backend: %s\n", cuda_backend_built() ? backend.c_str()
                                                          : "not built in this binary (configure with -DFP4SERVE_CUDA=ON)");
  const GpuStackReport g = probe_gpu_stack();
  if (h.gpus.empty()) {
    std::printf("GPU: no GPU (%s)\n", g.driver_problem.empty() ? "none visible" : g.driver_problem.c_str());
  }
  for (size_t i = 0; i < h.gpus.size(); ++i) {
    const GpuInfo& x = h.gpus[i];
    std::printf("GPU %zu: %s, SM %d.%d (sm_%d%d), %s\n", i, x.name.c_str(), x.sm_major, x.sm_minor, x.sm_major,
                x.sm_minor, gib(x.memory_bytes).c_str());
  }
  if (h.cuda_driver_version > 0 || !g.nvidia_driver.empty()) {
    std::printf("driver: %s, CUDA (driver API) %s, CUDA runtime %s, cuDNN %s\n",
                g.nvidia_driver.empty() ? "version unknown" : g.nvidia_driver.c_str(),
                cuda_version_text(h.cuda_driver_version).c_str(),
                g.cuda_runtime_version ? cuda_version_text(g.cuda_runtime_version).c_str() : "not found",
                h.cudnn_version ? fmt::format("{}.{}.{}", h.cudnn_version / 10000, h.cudnn_version / 100 % 100,
                                              h.cudnn_version % 100).c_str()
                                : "not found");
  }
  // fp4serve's own view (the CUDA runtime it links): each device, or why none is usable.
  std::printf("%s", describe_cuda_devices().c_str());
}

// --device as serve resolves it: the line serve logs, or serve's refusal.
RuleResult device_rule(const std::string& flag, HostInfo& h) {
  try {
    const DeviceChoice c = choose_device(flag, probe_cuda());
    h.gpu_backend = c.kind == DeviceKind::kCuda;
    std::printf("serve runs on: %s\n", c.log_line.c_str());
    return RuleResult{"device", Verdict::kOk, c.log_line};
  } catch (const std::exception& e) {
    std::printf("serve runs on: nothing: %s\n", e.what());
    return RuleResult{"device", Verdict::kRefused, e.what()};
  }
}

// Module groups of the report, by HF path.
std::string module_group(const PlannedModule& m) {
  if (m.kind == ModuleKind::kDense) return "";  // norms, conv1d, A_log, dt_bias: no linear kernel
  if (m.kind == ModuleKind::kEmbedding) return "embedding";
  if (m.kind == ModuleKind::kRoutedExperts) return "routed experts";
  if (m.path == "lm_head" || m.path.ends_with(".lm_head")) return "lm_head";
  if (m.path.find(".self_attn.") != std::string::npos) return "attention projections";
  if (m.path.find(".linear_attn.") != std::string::npos) return "GDN projections";
  if (m.path.find(".shared_expert_gate") != std::string::npos || m.path.ends_with(".mlp.gate")) return "router";
  if (m.path.find(".shared_expert.") != std::string::npos) return "shared expert";
  return "";
}

// The CPU kernel's weight view for a checkpoint format (model_weights.cpp's linear_as).
kernels::WeightLayout kernel_format(WeightFormatKind k) {
  switch (k) {
    case WeightFormatKind::kBF16: return kernels::WeightLayout::kBf16;
    case WeightFormatKind::kFP8PerTensor: return kernels::WeightLayout::kFp8Tensor;
    case WeightFormatKind::kFP8Block: return kernels::WeightLayout::kFp8Block;
    case WeightFormatKind::kNVFP4: return kernels::WeightLayout::kNvfp4;
    case WeightFormatKind::kInt4Gptq: return kernels::WeightLayout::kInt4Packed;  // repacked at load
  }
  return kernels::WeightLayout::kBf16;
}

std::string kernel_for(const PlannedModule& m, const std::string& isa, bool tier_packs) {
  if (m.kind == ModuleKind::kEmbedding) return "row gather (bf16)";
  const kernels::WeightLayout f = kernel_format(m.format.kind);
  const std::string view = kernels::weight_layout_name(f);
  const std::string op = m.kind == ModuleKind::kRoutedExperts ? "moe experts" : "linear";
  const bool panels = tier_packs && f != kernels::WeightLayout::kInt4Packed;  // packed_weight.h's formats
  return fmt::format("cpu {} {} ({}){}", op, view, isa,
                     panels ? ", packed at load into 16-row panels"
                            : m.format.kind == WeightFormatKind::kInt4Gptq ? ", repacked at load" : "");
}

// doctor's GPU memory plan, estimated: weights = the checkpoint's bytes, activations unmeasured.
void print_gpu_plan(const ModelFacts& m, const EngineFlags& f, const DeviceMemory& dev, uint64_t weight_bytes) {
  std::printf("== GPU memory plan (estimate: weights = the checkpoint's %.2f GiB, activations not measured; serve "
              "measures both) ==\n",
              static_cast<double>(weight_bytes) / (1ull << 30));
  if (dev.total_bytes == 0) {
    std::printf("no estimate: CUDA device 0 could not be queried\n");
    return;
  }
  try {
    const GpuMemoryPlan plan = preview_gpu_memory_plan(m, f, dev, weight_bytes);
    for (const auto& l : plan.log_lines) std::printf("%s\n", l.c_str());
  } catch (const std::exception& e) {
    std::printf("serve would refuse: %s\n", e.what());
  }
}

void print_model(const LoadedCheckpoint& ck, const ServeSettings& s, const HostInfo& h) {
  const ModelConfig& c = ck.config();
  std::printf("== Model ==\n");
  std::printf("model: %s\n", ck.directory().c_str());
  std::printf("architecture: %s (model_type %s, layout %s), %lld layers: %lld GDN + %lld full attention\n",
              c.architecture.c_str(), c.model_type.c_str(), std::string(model_layout_name(c.layout)).c_str(),
              static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.num_linear_attention_layers()),
              static_cast<long long>(c.num_full_attention_layers()));
  std::printf("quantization: %s\n", ck.quant_config().algo().empty() ? "none" : ck.quant_config().algo().c_str());
  std::string isa = "?";
  bool tier_packs = false;
  try {
    isa = std::string(kernels::cpu::isa_name(kernels::cpu::active_isa()));
    tier_packs = kernels::cpu::active_table().linear_packed != nullptr;
  } catch (const std::exception&) {
  }
  struct Row {
    int count = 0;
    uint64_t bytes = 0;
    std::string kernel;
  };
  std::map<std::pair<std::string, std::string>, Row> rows;
  std::vector<std::pair<std::string, std::string>> order;
  for (const PlannedModule& m : ck.plan().modules) {
    const std::string group = module_group(m);
    if (group.empty()) continue;
    const auto key = std::make_pair(group, m.kind == ModuleKind::kEmbedding ? std::string("bf16") : m.format.name());
    if (!rows.count(key)) order.push_back(key);
    Row& r = rows[key];
    r.count += 1;
    r.bytes += m.byte_size();
    r.kernel = kernel_for(m, isa, tier_packs);
  }
  std::printf("modules (group, format, count, bytes -> kernel):\n");
  for (const auto& key : order) {
    const Row& r = rows[key];
    std::printf("  %-22s %-22s %4d %12s -> %s\n", key.first.c_str(), key.second.c_str(), r.count,
                fmt::format("{:.3f} MB", static_cast<double>(r.bytes) / 1e6).c_str(), r.kernel.c_str());
  }
  std::printf("weight bytes: %llu\n", static_cast<unsigned long long>(ck.plan().total_bytes()));
  const bool fp8_kv = ck.quant_config().kv_cache() == KvCacheQuant::kFP8;
  const auto kv = cpu_kv_dtype(s.engine.kv_cache_dtype, fp8_kv);
  if (kv) {
    const bool bf16 = *kv == kernels::KvDtype::kBf16;
    std::printf("KV cache: %s (--kv-cache-dtype %s%s), %llu bytes per token -> paged attention (%s)\n",
                bf16 ? "bf16" : "fp8_e4m3", s.engine.kv_cache_dtype.c_str(),
                s.engine.kv_cache_dtype == "auto" ? (fp8_kv ? ": the checkpoint's FP8 KV" : ": the model dtype") : "",
                static_cast<unsigned long long>(kv_cache_bytes_per_token(c, bf16 ? 2 : 1)), isa.c_str());
  } else {
    std::printf("KV cache: --kv-cache-dtype %s has no CPU kernel (see checks)\n", s.engine.kv_cache_dtype.c_str());
  }
  std::printf("GDN state bytes per sequence: %llu (fp32 recurrent + bf16 conv state) -> gated delta rule (%s)\n",
              static_cast<unsigned long long>(gdn_state_bytes_per_sequence(c)), isa.c_str());
  if (!h.gpu_backend) {
    std::string note;
    try {
      const uint64_t budget = cache_budget_bytes(s.engine, h, &note);
      std::printf("== Cache plan (%s; computed, nothing allocated) ==\n",
                  fmt::format("{:.0f} MiB budget", static_cast<double>(budget) / (1 << 20)).c_str());
      if (!note.empty()) std::printf("%s\n", note.c_str());
      const engine::CachePlan plan = preview_cache_plan(*s.model, s.engine, h);
      for (const auto& l : plan.log_lines) std::printf("%s\n", l.c_str());
    } catch (const std::exception& e) {
      std::printf("no cache plan: %s\n", e.what());
    }
  } else {
    print_gpu_plan(*s.model, s.engine, query_device_memory(0), ck.file_bytes());
  }
}

void print_checks(const std::vector<RuleResult>& results) {
  std::printf("== Checks ==\n");
  for (const RuleResult& r : results) {
    switch (r.verdict) {
      case Verdict::kOk:
        std::printf("  %-34s ok%s%s\n", r.rule.c_str(), r.detail.empty() ? "" : ": ", r.detail.c_str());
        break;
      case Verdict::kNotApplicable:
        std::printf("  %-34s n/a: %s\n", r.rule.c_str(), r.detail.c_str());
        break;
      case Verdict::kRefused:
        std::printf("  %-34s REFUSED: %s\n", r.rule.c_str(), r.detail.c_str());
        break;
    }
  }
}

void run_doctor(DoctorArgs a) {
  if (!a.model_positional.empty() && !a.model_flag.empty() && a.model_positional != a.model_flag)
    throw std::runtime_error("give the model once: as MODEL or as --model, not two different ones");
  ServeSettings& s = a.settings;
  if (s.engine.threads > 0) kernels::cpu::set_num_threads(s.engine.threads);
  HostInfo host = probe_host();
  std::printf("fp4serve doctor: preflight report\n");
  print_cpu();
  print_memory(host);
  print_cuda(host);
  const RuleResult device = device_rule(s.engine.device, host);
  s.gpu_memory_utilization = s.engine.gpu_memory_utilization;
  const std::string model = a.model_flag.empty() ? a.model_positional : a.model_flag;
  std::string checkpoint_problem;
  if (!model.empty()) {
    // No touch_pages: only headers and configs are read, so this is fast on a 20 GB checkpoint.
    LoadOptions opts;
    opts.touch_pages = false;
    opts.show_progress = false;
    try {
      const LoadedCheckpoint ck = LoadedCheckpoint::open(resolve_model_dir(model, s.engine.source), opts);
      s.model = model_facts(ck, s.engine.tokenizer);
      print_model(ck, s, host);
    } catch (const std::exception& e) {
      // serve would stop here too; the flag rules are still worth reporting.
      checkpoint_problem = e.what();
      std::printf("== Model ==\ncannot open %s\n", model.c_str());
    }
  } else {
    std::printf("== Model ==\nno MODEL given: serve would use its built-in demo model\n");
  }
  auto results = evaluate_preflight(s, host);
  results.insert(results.begin(), device);
  // serve refuses these before loading anything: a certificate that does not load, a CORS list
  // that is not JSON.
  try {
    const TransportSettings t = resolve_transport_flags(a.transport);
    results.push_back(RuleResult{"transport flags (TLS, CORS)", Verdict::kOk,
                                 t.tls.enabled() ? "certificate and key load" : "plain http"});
  } catch (const std::exception& e) {
    results.push_back(RuleResult{"transport flags (TLS, CORS)", Verdict::kRefused, e.what()});
  }
  try {
    const MediaSettings m = resolve_media_flags(a.media);
    results.push_back(RuleResult{"image flags", Verdict::kOk,
                                 "at most " + std::to_string(m.image_limit) + " image(s) per prompt"});
  } catch (const std::exception& e) {
    results.push_back(RuleResult{"image flags", Verdict::kRefused, e.what()});
  }
  if (!checkpoint_problem.empty())
    results.insert(results.begin(), RuleResult{"checkpoint", Verdict::kRefused, checkpoint_problem});
  print_checks(results);
  const auto refused = std::count_if(results.begin(), results.end(),
                                     [](const RuleResult& r) { return r.verdict == Verdict::kRefused; });
  std::printf("%s\n", refused == 0 ? "verdict: ok, serve would start with these flags"
                                   : fmt::format("verdict: {} refused, serve would not start", refused).c_str());
  std::fflush(stdout);
  if (refused > 0) throw std::runtime_error(fmt::format("doctor: {} configuration(s) refused (see above)", refused));
}

}  // namespace

void register_doctor(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand("doctor", "preflight report: machine, model, kernels, cache plan and every refusal "
                                           "for the given serve flags (exit 1 if serve would refuse)");
  ServeSettings& s = a->settings;
  cmd->add_option("MODEL", a->model_positional, "model directory or Hugging Face id in the local cache");
  cmd->add_option("--model", a->model_flag, "the same as MODEL");
  // The serve flags that rules read.
  cmd->add_option("--tensor-parallel-size", s.tensor_parallel_size, "as serve");
  cmd->add_option("--reasoning-parser", s.reasoning_parser, "as serve");
  cmd->add_flag("--enable-auto-tool-choice", s.enable_auto_tool_choice, "as serve");
  cmd->add_option("--tool-call-parser", s.tool_call_parser, "as serve");
  cmd->add_option("--generation-config", s.generation_config, "as serve");
  add_engine_flags(*cmd, s.engine);
  add_gpu_flags(*cmd, s.gpu);
  add_transport_flags(*cmd, a->transport);
  add_media_flags(*cmd, a->media);
  add_engine_process_flags(*cmd, a->engine_process);
  // serve's other flags: accepted, not checked (they cannot make a start fail).
  for (const char* o : {"--host", "--port", "--api-key", "--chat-template", "--default-chat-template-kwargs",
                        "--health-stall-timeout", "--shutdown-timeout", "--max-waiting-requests", "--max-logprobs",
                        "--io-threads", "--max-connections", "--timeout-keep-alive", "--request-head-timeout",
                        "--request-body-timeout"})
    cmd->add_option(o, a->ignored_text, "as serve (not checked)")->group("serve flags doctor does not check");
  cmd->add_option("--served-model-name", a->ignored_list, "as serve (not checked)")
      ->group("serve flags doctor does not check");
  for (const char* f : {"--disable-log-stats", "--disable-log-requests", "--enable-log-requests",
                        "--enable-prompt-tokens-details", "--enable-force-include-usage", "--return-tokens-as-token-ids",
                        "--enable-debug-endpoints", "--trust-request-chat-template"})
    cmd->add_flag(f, a->ignored_flag, "as serve (not checked)")->group("serve flags doctor does not check");
  cmd->callback([a] { run_doctor(*a); });
}

}  // namespace fp4serve::tools
