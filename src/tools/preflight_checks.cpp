#include "tools/preflight_checks.h"
#include "tools/speculative_config.h"
#include "tools/compilation_config.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>

#include "checkpoint/tensor_plan.h"
#include "checkpoint/weight_loader.h"
#include "engine/engine_error.h"
#include "model/paged_kv_cache.h"

namespace fp4serve::tools {
namespace {

// cuDNN's fix for the sm120/sm121 fusion-engine GEMM that writes past its shared memory
// ("matrix multiplication with mainloop fusions could produce incorrect results on ... sm120 and
// sm121 has been fixed": cuDNN 9.23.1 release notes; seed "Qwen3.6 on an RTX PRO 6000").
constexpr int kCudnnSm120Fix = 9'23'01;  // cudnnGetVersion() encoding: major*10000 + minor*100 + patch

// vLLM's --moe-backend values (vllm/config/kernel.py; docs/vllm-surface.md §2) plus the SM120
// native-FP4 path the seeds use (flashinfer_b12x).
const std::vector<std::string> kMoeBackends = {"auto",        "triton",           "deep_gemm",        "deep_gemm_mega_moe",
                                               "cutlass",     "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_cutedsl",
                                               "flashinfer_b12x", "marlin",       "aiter",            "emulation"};

// vLLM normalises backend names: case-insensitive, '-' and '_' alike.
std::string normalise_backend(std::string s) {
  for (auto& c : s) c = c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_sm12x(const GpuInfo& g) { return g.sm_major == 12; }
bool any_gpu(const HostInfo& h, const std::function<bool(const GpuInfo&)>& pred) {
  return std::any_of(h.gpus.begin(), h.gpus.end(), pred);
}
std::string gpu_label(const GpuInfo& g) { return fmt::format("{} (sm_{}{})", g.name, g.sm_major, g.sm_minor); }
std::string first_gpu_where(const HostInfo& h, const std::function<bool(const GpuInfo&)>& pred) {
  for (const auto& g : h.gpus)
    if (pred(g)) return gpu_label(g);
  return "";
}
std::string cudnn_text(int v) { return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100); }

// Collects the results; each rule is one call of ok/refused/na.
class Rules {
 public:
  void ok(const std::string& rule, const std::string& detail = "") { out_.push_back({rule, Verdict::kOk, detail}); }
  void refused(const std::string& rule, const std::string& reason) { out_.push_back({rule, Verdict::kRefused, reason}); }
  void na(const std::string& rule, const std::string& why) { out_.push_back({rule, Verdict::kNotApplicable, why}); }
  void check(const std::string& rule, bool bad, const std::string& reason, const std::string& ok_detail = "") {
    bad ? refused(rule, reason) : ok(rule, ok_detail);
  }
  std::vector<RuleResult> take() { return std::move(out_); }

 private:
  std::vector<RuleResult> out_;
};

// --- flags that serve refuses on any machine ---------------------------------------------------

void flag_rules(const ServeSettings& s, const HostInfo& h, Rules& r) {
  if (!h.gpu_backend) {
    r.check("tensor-parallel-size", s.tensor_parallel_size != 1,
            fmt::format("--tensor-parallel-size {} is not supported yet: the CPU backend runs on one process (use 1)",
                        s.tensor_parallel_size));
    r.check("gpu-memory-utilization", !s.gpu_memory_utilization.empty(),
            "--gpu-memory-utilization applies to GPUs; the CPU backend sizes its cache with --kv-cache-memory "
            "(bytes, e.g. 8GiB)");
  } else {
    double u = 0;
    bool parsed = s.gpu_memory_utilization.empty();
    if (!parsed) {
      try {
        u = std::stod(s.gpu_memory_utilization);
        parsed = u > 0 && u <= 1;
      } catch (const std::exception&) {
      }
    }
    r.check("gpu-memory-utilization", !parsed,
            fmt::format("--gpu-memory-utilization {} must be a fraction in (0, 1]", s.gpu_memory_utilization));
  }
  r.check("reasoning-parser", !s.reasoning_parser.empty() && s.reasoning_parser != "qwen3",
          fmt::format("--reasoning-parser {}: only qwen3 is supported", s.reasoning_parser));
  r.check("auto-tool-choice", s.enable_auto_tool_choice && s.tool_call_parser.empty(),
          "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  r.check("tool-call-parser", !s.tool_call_parser.empty() && s.tool_call_parser != "qwen3_coder",
          fmt::format("--tool-call-parser {}: only qwen3_coder is supported", s.tool_call_parser));
  r.check("generation-config", s.generation_config != "auto" && s.generation_config != "vllm",
          "--generation-config: only 'auto' (the model's generation_config.json) and 'vllm' are supported");
  if (!h.gpu_backend) {
    const bool kv_ok = cpu_kv_dtype(s.engine.kv_cache_dtype, s.model && s.model->checkpoint_fp8_kv).has_value();
    r.check("kv-cache-dtype", !kv_ok,
            fmt::format("--kv-cache-dtype {} is not supported: use auto, bfloat16, fp8 or fp8_e4m3 (fp8_e5m2 and "
                        "nvfp4 KV caches are not implemented on the CPU backend)",
                        s.engine.kv_cache_dtype));
  }
  r.check("prefix-snapshot-interval", s.engine.block_size > 0 && s.engine.snapshot_interval % s.engine.block_size != 0,
          fmt::format("the GDN snapshot interval ({}) must be a multiple of the block size ({})",
                      s.engine.snapshot_interval, s.engine.block_size));
  if (!s.engine.kv_cache_memory.empty()) {
    std::string problem;
    try {
      parse_byte_size(s.engine.kv_cache_memory, "--kv-cache-memory");
    } catch (const std::exception& e) {
      problem = e.what();
    }
    r.check("kv-cache-memory", !problem.empty(), problem);
  }
}

// --- backends and CUDA graphs --------------------------------------------------------------------

void backend_rules(const ServeSettings& s, const HostInfo& h, int max_num_seqs, Rules& r) {
  const std::string moe = normalise_backend(s.gpu.moe_backend);
  const std::string attn = normalise_backend(s.gpu.attention_backend);
  if (std::find(kMoeBackends.begin(), kMoeBackends.end(), moe) == kMoeBackends.end()) {
    r.refused("moe-backend", fmt::format("--moe-backend {} is not one of vLLM's MoE backends", s.gpu.moe_backend));
  } else if (!h.gpu_backend && moe != "auto") {
    r.refused("moe-backend", fmt::format("--moe-backend {} picks a GPU kernel; the CPU backend runs one MoE kernel per "
                                         "weight format (use auto)",
                                         s.gpu.moe_backend));
  } else if (moe == "flashinfer_cutlass" && any_gpu(h, is_sm12x) && (!s.model || s.model->nvfp4_experts)) {
    r.refused("moe-backend",
              fmt::format("--moe-backend flashinfer_cutlass: the FlashInfer CUTLASS FP4 MoE path is broken on SM120 "
                          "({}); use flashinfer_b12x or auto (seed: 'The Nightly From Hell')",
                          first_gpu_where(h, is_sm12x)));
  } else {
    r.ok("moe-backend", moe);
  }

  if (!h.gpu_backend && attn != "auto") {
    r.refused("attention-backend", fmt::format("--attention-backend {} picks a GPU kernel; the CPU backend has one "
                                               "paged-attention kernel (use auto)",
                                               s.gpu.attention_backend));
  } else if (attn == "flashinfer" && any_gpu(h, is_sm12x) && (!s.model || s.model->num_gdn_layers > 0)) {
    r.refused("attention-backend",
              fmt::format("--attention-backend flashinfer breaks hybrid (GDN + attention) models on SM120 ({}; "
                          "vllm#40677): leave it on auto",
                          first_gpu_where(h, is_sm12x)));
  } else {
    r.ok("attention-backend", attn);
  }

  // The same parser and flag resolution serve and generate use (cuda_graph_flags.h).
  CompilationConfig cc;
  try {
    cc = parse_compilation_config(s.gpu.compilation_config);
    (void)resolve_cuda_graph_flags(s.gpu);
    r.ok("compilation-config", cc.given ? "parsed" : "not given");
  } catch (const std::runtime_error& e) {
    r.refused("compilation-config", e.what());
  }
  std::vector<int> capture_sizes = cc.cudagraph_capture_sizes.value_or(s.gpu.cudagraph_capture_sizes);

  // vLLM: max_cudagraph_capture_size must equal the largest of cudagraph_capture_sizes when both
  // are given (vllm/config/compilation.py; seed: "would in fact conflict").
  const int largest = capture_sizes.empty() ? 0 : *std::max_element(capture_sizes.begin(), capture_sizes.end());
  if (s.gpu.max_cudagraph_capture_size > 0 && largest > 0) {
    r.check("cudagraph-capture-size-consistent", s.gpu.max_cudagraph_capture_size != largest,
            fmt::format("--max-cudagraph-capture-size {} must equal the largest of cudagraph_capture_sizes ({}); "
                        "give only one of them",
                        s.gpu.max_cudagraph_capture_size, largest));
  } else {
    r.na("cudagraph-capture-size-consistent", "not both --max-cudagraph-capture-size and cudagraph_capture_sizes given");
  }

  // A capture size above --max-num-seqs is a graph that decode never replays: memory and start-up
  // time for nothing, and on SM120 large captured sizes are where replay crashes were seen (seed:
  // the RTX 5090 reference caps captures at 64; the 5070 Ti build bounds them to [1,2,4,8] for
  // max-num-seqs 8).
  const int biggest = std::max(largest, s.gpu.max_cudagraph_capture_size);
  if (s.gpu.enforce_eager) {
    r.na("cudagraph-capture-sizes", "--enforce-eager: no CUDA graphs are captured");
  } else if (biggest == 0) {
    r.na("cudagraph-capture-sizes", "no capture sizes given");
  } else if (max_num_seqs <= 0) {
    r.na("cudagraph-capture-sizes", "max-num-seqs unknown (give --max-num-seqs or MODEL)");
  } else {
    r.check("cudagraph-capture-sizes", biggest > max_num_seqs,
            fmt::format("CUDA graph capture size {} is beyond --max-num-seqs {}: decode batches never reach it, so the "
                        "graph costs memory and capture time and is never replayed; bound the capture sizes to "
                        "max-num-seqs (e.g. cudagraph_capture_sizes [1,2,4,...,{}])",
                        biggest, max_num_seqs, max_num_seqs),
            fmt::format("largest {} <= max-num-seqs {}", biggest, max_num_seqs));
  }
}

// --- what the visible GPUs cannot do ------------------------------------------------------------

void gpu_rules(const ServeSettings& s, const HostInfo& h, Rules& r) {
  const char* none = "no GPU visible";
  if (h.gpus.empty()) {
    for (const char* rule : {"gpu-count", "nvfp4-kv-cache", "cudnn-sm120"}) r.na(rule, none);
    return;
  }
  r.check("gpu-count", s.tensor_parallel_size > static_cast<int>(h.gpus.size()),
          fmt::format("--tensor-parallel-size {} needs {} GPUs, {} visible", s.tensor_parallel_size,
                      s.tensor_parallel_size, h.gpus.size()),
          fmt::format("{} GPU(s) for tensor-parallel-size {}", h.gpus.size(), s.tensor_parallel_size));

  const bool nvfp4_kv = normalise_backend(s.engine.kv_cache_dtype) == "nvfp4";
  const auto not_sm100 = [](const GpuInfo& g) { return g.sm_major != 10; };
  if (!nvfp4_kv) {
    r.ok("nvfp4-kv-cache", "KV cache is not nvfp4");
  } else {
    r.check("nvfp4-kv-cache", any_gpu(h, not_sm100),
            fmt::format("--kv-cache-dtype nvfp4 needs SM100 (B200/GB200; vLLM refuses it elsewhere: 'requires "
                        "sm100f'); {} cannot run it{} - use fp8, which the checkpoint is calibrated for",
                        first_gpu_where(h, not_sm100),
                        any_gpu(h, is_sm12x) ? ", and on SM120 the NVFP4 KV path crashes separately (seed: RTX PRO 6000)"
                                             : ""));
  }

  if (!any_gpu(h, is_sm12x)) {
    r.na("cudnn-sm120", "no SM120/SM121 GPU");
  } else if (h.cudnn_version == 0) {
    r.ok("cudnn-sm120", "no cuDNN found (nothing to run the faulty fusion GEMM)");
  } else {
    r.check("cudnn-sm120", h.cudnn_version < kCudnnSm120Fix,
            fmt::format("cuDNN {} on {}: cuDNN before 9.23.1 has a fusion-engine GEMM that stores past its shared "
                        "memory on sm120/sm121 (illegal memory access / misaligned address under CUDA graphs; "
                        "--enforce-eager only makes it rarer). Install nvidia-cudnn-cu13>=9.23.1 (cuDNN 9.23.1 "
                        "release notes; seed: RTX PRO 6000 core dump)",
                        cudnn_text(h.cudnn_version), first_gpu_where(h, is_sm12x)),
            fmt::format("cuDNN {}", cudnn_text(h.cudnn_version)));
  }
}

// --- what the checkpoint and the cache budget allow ----------------------------------------------

int model_rules(const ServeSettings& s, const HostInfo& h, Rules& r) {
  const char* none = "no MODEL given (serve would use the built-in demo model)";
  if (!s.model) {
    for (const char* rule : {"model-layout", "module-formats", "tokenizer", "speculative-config", "max-model-len",
                             "cache-plan"})
      r.na(rule, none);
    return s.engine.max_num_seqs;
  }
  const ModelFacts& m = *s.model;
  r.check("model-layout", m.layout != ModelLayout::kQwen3_5Moe,
          "the Qwen3-Next fused, head-grouped GDN projections are not supported by the forward pass yet (inspect "
          "and the loader do support them)",
          std::string(model_layout_name(m.layout)));
  std::string bad;
  for (const auto& u : m.unsupported_modules) bad += (bad.empty() ? "" : "; ") + u;
  r.check("module-formats", !m.unsupported_modules.empty(), bad, "every module has a CPU kernel");
  r.check("tokenizer", !m.tokenizer_problem.empty(), m.tokenizer_problem, "tokenizer.json found");
  // --speculative-config: serve refuses a malformed one, and MTP on a checkpoint without its block.
  if (s.engine.speculative_config.empty()) {
    r.na("speculative-config", "no --speculative-config");
  } else {
    try {
      const SpeculativeSettings spec = parse_speculative_config(s.engine.speculative_config);
      r.check("speculative-config", !m.mtp_problem.empty(),
              "--speculative-config: MTP speculative decoding is unavailable: " + m.mtp_problem,
              fmt::format("MTP, {} draft tokens per step", spec.num_speculative_tokens));
    } catch (const std::runtime_error& e) {
      r.refused("speculative-config", e.what());
    }
  }
  r.check("max-model-len", s.engine.max_model_len > m.max_position_embeddings,
          fmt::format("--max-model-len {} is larger than the model's max_position_embeddings {} (config.json)",
                      s.engine.max_model_len, m.max_position_embeddings),
          fmt::format("{} of {}", s.engine.max_model_len > 0 ? s.engine.max_model_len : m.max_position_embeddings,
                      m.max_position_embeddings));
  if (h.gpu_backend) {
    r.na("cache-plan", "the GPU engine sizes its cache itself");
    return s.engine.max_num_seqs;
  }
  if (!cpu_kv_dtype(s.engine.kv_cache_dtype, m.checkpoint_fp8_kv)) {
    r.na("cache-plan", "needs a KV cache dtype the CPU backend has (see kv-cache-dtype)");
    return s.engine.max_num_seqs;
  }
  try {
    const engine::CachePlan plan = preview_cache_plan(m, s.engine, h);
    r.ok("cache-plan", fmt::format("{} KV tokens, max-num-seqs {}, {:.2f}x concurrency at max-model-len", plan.kv_tokens,
                                   plan.max_num_seqs, plan.max_concurrency));
    return plan.max_num_seqs;
  } catch (const std::exception& e) {
    r.refused("cache-plan", e.what());
    return s.engine.max_num_seqs;
  }
}

}  // namespace

void add_gpu_flags(CLI::App& cmd, GpuFlags& f) {
  add_cuda_graph_flags(cmd, f);
  cmd.add_option("--moe-backend", f.moe_backend, "MoE kernel family (GPU; CPU: auto)");
  cmd.add_option("--attention-backend", f.attention_backend, "attention kernel family (GPU; CPU: auto)");
}

ModelFacts model_facts(const LoadedCheckpoint& ck, const std::string& tokenizer_flag) {
  ModelFacts f;
  const ModelConfig& c = ck.config();
  f.path = ck.directory().string();
  f.layout = c.layout;
  f.checkpoint_fp8_kv = ck.quant_config().kv_cache() == KvCacheQuant::kFP8;
  f.max_position_embeddings = c.max_position_embeddings;
  f.num_attention_layers = static_cast<int>(c.num_full_attention_layers());
  f.num_gdn_layers = static_cast<int>(c.num_linear_attention_layers());
  f.num_kv_heads = static_cast<int>(c.num_key_value_heads);
  f.head_dim = static_cast<int>(c.head_dim);
  f.gdn_state_bytes_per_seq = f.num_gdn_layers > 0 ? gdn_state_bytes_per_sequence(c) : 0;
  f.mtp_problem = ck.mtp_unavailable_reason();
  for (const PlannedModule& m : ck.plan().modules) {
    if (m.kind == ModuleKind::kRoutedExperts && m.format.kind == WeightFormatKind::kNVFP4) f.nvfp4_experts = true;
    // model_weights.cpp binds only symmetric INT4 without act-order.
    if (m.format.kind == WeightFormatKind::kInt4Gptq && (!m.format.sym || m.format.desc_act))
      f.unsupported_modules.push_back(
          fmt::format("{}: INT4 {} is not supported yet (only symmetric, no act-order)", m.path, m.format.name()));
  }
  const std::filesystem::path where = tokenizer_flag.empty() ? ck.directory() : std::filesystem::path(tokenizer_flag);
  const bool found = std::filesystem::is_regular_file(where) || std::filesystem::exists(where / "tokenizer.json") ||
                     std::filesystem::exists(where / "tokenizer.json.gz");
  if (!found) f.tokenizer_problem = fmt::format("no tokenizer.json in {}: give --tokenizer PATH", where.string());
  return f;
}

std::optional<kernels::KvDtype> cpu_kv_dtype(const std::string& flag, bool checkpoint_fp8_kv) {
  if (flag == "auto") return checkpoint_fp8_kv ? kernels::KvDtype::kFp8E4M3 : kernels::KvDtype::kBf16;
  if (flag == "fp8" || flag == "fp8_e4m3") return kernels::KvDtype::kFp8E4M3;
  if (flag == "bfloat16" || flag == "bf16") return kernels::KvDtype::kBf16;
  return std::nullopt;
}

uint64_t cache_budget_bytes(const EngineFlags& flags, const HostInfo& host, std::string* note) {
  if (!flags.kv_cache_memory.empty()) return parse_byte_size(flags.kv_cache_memory, "--kv-cache-memory");
  // load_serving_model's default.
  const uint64_t lo = 256ull << 20, hi = 8ull << 30;
  const uint64_t bytes = std::clamp<uint64_t>(host.mem_available_bytes / 4, lo, hi);
  if (note)
    *note = fmt::format("--kv-cache-memory not given: using {} MiB (25% of {} MiB available, within 256 MiB..8 GiB)",
                        bytes >> 20, host.mem_available_bytes >> 20);
  return bytes;
}

engine::CachePlan preview_cache_plan(const ModelFacts& m, const EngineFlags& f, const HostInfo& host) {
  engine::CachePlanInput in = preview_cache_plan_input(m, f);
  in.budget_bytes = cache_budget_bytes(f, host);
  return engine::plan_cache(in);
}

engine::CachePlanInput preview_cache_plan_input(const ModelFacts& m, const EngineFlags& f) {
  const auto kv = cpu_kv_dtype(f.kv_cache_dtype, m.checkpoint_fp8_kv);
  if (!kv) throw std::runtime_error(fmt::format("--kv-cache-dtype {}: no CPU KV cache of this dtype", f.kv_cache_dtype));
  engine::CachePlanInput in;
  in.max_num_seqs = f.max_num_seqs;
  in.max_num_seqs_explicit = f.max_num_seqs > 0;
  in.max_model_len = f.max_model_len > 0 ? f.max_model_len : static_cast<int>(m.max_position_embeddings);
  in.block_size = f.block_size;
  // MTP speculative decoding (as Engine plans it): the MTP layer's KV in the same blocks, and N GDN
  // rollback entries per sequence. A malformed flag is serve's to refuse; here it plans without it.
  int drafts = 0;
  if (!f.speculative_config.empty()) {
    try {
      drafts = parse_speculative_config(f.speculative_config).num_speculative_tokens;
    } catch (const std::runtime_error&) {
    }
  }
  in.kv_block_bytes = model::PagedKvCache::block_bytes(m.num_attention_layers + (drafts > 0 ? 1 : 0), f.block_size,
                                                      m.num_kv_heads, m.head_dim, *kv);
  in.rollback_entries_per_seq = drafts;
  in.state_bytes_per_seq = m.gdn_state_bytes_per_seq;
  in.prefix_caching = f.enable_prefix_caching;
  in.num_kv_blocks_override = f.num_gpu_blocks_override;
  in.kv_dtype_name = *kv == kernels::KvDtype::kBf16 ? "bf16" : "fp8_e4m3";  // engine.cpp's kv_dtype_name
  return in;
}

std::vector<RuleResult> evaluate_preflight(const ServeSettings& s, const HostInfo& h) {
  Rules r;
  flag_rules(s, h, r);
  const int max_num_seqs = model_rules(s, h, r);
  backend_rules(s, h, max_num_seqs, r);
  gpu_rules(s, h, r);
  return r.take();
}

std::vector<RuleResult> preflight_refusals(const ServeSettings& s, const HostInfo& h) {
  std::vector<RuleResult> out;
  for (auto& res : evaluate_preflight(s, h))
    if (res.verdict == Verdict::kRefused) out.push_back(std::move(res));
  return out;
}

void enforce_preflight(const ServeSettings& s, const HostInfo& h) {
  const auto refused = preflight_refusals(s, h);
  if (refused.empty()) return;
  std::string msg = refused.size() == 1 ? refused.front().detail
                                        : fmt::format("{} configuration problems:", refused.size());
  if (refused.size() > 1)
    for (const auto& x : refused) msg += "\n  " + x.detail;
  throw PreflightRefused(msg);
}

}  // namespace fp4serve::tools
