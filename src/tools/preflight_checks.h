// Every configuration fp4serve knows to be broken, as data: one rule per known-bad setup with the
// reason a user needs (a design rule of fp4serve: "configurations known to be broken are refused
// with an explanation, not run"). `fp4serve doctor` prints every rule's verdict; `serve` runs the same
// rules and refuses on the first start-up with all reasons at once, so doctor and serve never
// disagree.
//
// The rules need three inputs: the serve flags (ServeSettings), what the checkpoint is (ModelFacts,
// read without touching weight pages) and the machine (HostInfo: memory, GPUs, cuDNN). The GPU
// rules come from the seed deployments (RTX 5070 Ti / RTX PRO 6000, SM120) and vLLM's own checks;
// each reason names its source so a user can tell a rule from folklore.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/model_config.h"
#include "engine/cache_plan.h"
#include "kernels/attention.h"
#include "tools/cuda_graph_flags.h"
#include "tools/engine_setup.h"

namespace CLI {
class App;
}
namespace fp4serve {
class LoadedCheckpoint;
}

namespace fp4serve::tools {

// vLLM serve flags that only matter to a GPU engine. `serve` does not take them yet; doctor does,
// so that a vLLM command line can be checked before anyone boots it. add_gpu_flags registers them.
// The CUDA-graph ones (--enforce-eager, -O, --compilation-config, ...) are cuda_graph_flags.h's, which
// serve and generate also act on.
struct GpuFlags : CudaGraphFlags {
  std::string moe_backend = "auto";
  std::string attention_backend = "auto";
};
void add_gpu_flags(CLI::App& cmd, GpuFlags& flags);

// What the rules need to know about a checkpoint. Built from a LoadedCheckpoint opened without
// touch_pages: nothing here reads weights.
struct ModelFacts {
  std::string path;
  ModelLayout layout = ModelLayout::kQwen3_5Moe;
  bool checkpoint_fp8_kv = false;     // kv_cache_quant_algo FP8: --kv-cache-dtype auto means fp8_e4m3
  int64_t max_position_embeddings = 0;
  int num_attention_layers = 0;
  int num_gdn_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  uint64_t gdn_state_bytes_per_seq = 0;
  bool nvfp4_experts = false;                    // any routed experts stored as NVFP4
  std::vector<std::string> unsupported_modules;  // "<module>: <format>", modules the forward pass refuses
  std::string tokenizer_problem;                 // "" = a tokenizer.json was found
  std::string mtp_problem;                       // "" = the MTP block is usable (LoadedCheckpoint::mtp_unavailable_reason)
};
// `tokenizer_flag`: --tokenizer ("" = the model directory).
ModelFacts model_facts(const LoadedCheckpoint& checkpoint, const std::string& tokenizer_flag);

// Everything `serve` is told on its command line that a rule looks at.
struct ServeSettings {
  int tensor_parallel_size = 1;
  std::string gpu_memory_utilization;  // "" = not given
  std::string reasoning_parser;
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  std::string generation_config = "auto";
  EngineFlags engine;
  GpuFlags gpu;
  std::optional<ModelFacts> model;  // absent: no MODEL given (serve's demo model), model rules say n/a
};

struct GpuInfo {
  std::string name;
  int sm_major = 0;
  int sm_minor = 0;
  uint64_t memory_bytes = 0;
};

struct HostInfo {
  uint64_t mem_total_bytes = 0;
  uint64_t mem_available_bytes = 0;  // sizes the default --kv-cache-memory (25%, 256 MiB..8 GiB)
  // Whether serve runs on a GPU: false from probe_host(); serve and doctor set it from --device
  // (device_choice.h). The GPU rules judge the visible GPUs either way.
  bool gpu_backend = false;
  std::vector<GpuInfo> gpus;     // visible to the CUDA driver
  int cuda_driver_version = 0;   // cuDriverGetVersion: 13000 = CUDA 13.0 (0 = no driver)
  int cudnn_version = 0;         // cudnnGetVersion: 92400 = 9.24.0 (0 = no cuDNN found)
};

enum class Verdict { kOk, kRefused, kNotApplicable };

struct RuleResult {
  std::string rule;    // short name: "tensor-parallel-size", "cudnn-sm120"
  Verdict verdict = Verdict::kOk;
  std::string detail;  // the reason when refused; what was checked (or why n/a) otherwise
};

// Every rule, in a fixed order, with its verdict.
std::vector<RuleResult> evaluate_preflight(const ServeSettings& settings, const HostInfo& host);
// Only the refused ones (empty = the configuration may start).
std::vector<RuleResult> preflight_refusals(const ServeSettings& settings, const HostInfo& host);

class PreflightRefused : public std::runtime_error {
 public:
  explicit PreflightRefused(const std::string& what) : std::runtime_error(what) {}
};
// Throws PreflightRefused listing every refusal, one per line, when there is any.
void enforce_preflight(const ServeSettings& settings, const HostInfo& host);

// The KV cache dtype the CPU backend uses for --kv-cache-dtype `flag` (as load_serving_model
// resolves it); nullopt when the CPU backend cannot run it.
std::optional<kernels::KvDtype> cpu_kv_dtype(const std::string& flag, bool checkpoint_fp8_kv);

// The cache budget serve would use: --kv-cache-memory, else 25% of available memory within
// 256 MiB..8 GiB. `note` (if given) receives the line serve logs for the default.
uint64_t cache_budget_bytes(const EngineFlags& flags, const HostInfo& host, std::string* note = nullptr);

// The engine's cache plan for these settings, computed without allocating anything (the same
// inputs Engine's constructor gives plan_cache). Throws EngineConfigError as plan_cache does, and
// std::runtime_error for an unusable --kv-cache-dtype or --kv-cache-memory.
engine::CachePlan preview_cache_plan(const ModelFacts& model, const EngineFlags& flags, const HostInfo& host);
// Its input without the budget (the GPU preview gives its own: gpu_memory_setup.h).
engine::CachePlanInput preview_cache_plan_input(const ModelFacts& model, const EngineFlags& flags);

}  // namespace fp4serve::tools
