// `fp4serve bench model`: the model's own speed on this machine, measured in-process in one run
// together with the machine's roofline, so the ratio between them needs nothing from elsewhere:
//   - roofline: read bandwidth (all threads, buffer >> LLC), peak fp32 FMA and bf16 dot rates;
//   - prefill tok/s of one prompt of --prompt-len tokens;
//   - decode tok/s at each --batch size (B sequences of short prompts, then --decode-steps steps of
//     B tokens through Qwen35MoeModel::forward_batch with a paged KV cache and GDN state slots, the
//     way engine::ModelRunner drives it);
//   - time per layer kind (GDN, attention, MoE, lm_head) per step (model/step_profile.h);
//   - active bytes per token and decode efficiency = bytes/token x tok/s / bandwidth.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "model/step_profile.h"
#include "tools/bench/active_bytes.h"
#include "tools/bench/roofline.h"
#include "tools/bench/structured_bench.h"

namespace CLI {
class App;
}

namespace fp4serve::tools::bench {

struct ModelBenchOptions {
  std::string model;
  int prompt_len = 512;
  std::vector<int> batches = {1, 8, 32};
  int decode_steps = 32;
  int decode_prompt_len = 16;  // each decode sequence's prompt (prefilled untimed)
  int threads = 0;             // 0: the kernels' default (all cores)
  std::string kv_cache_dtype = "auto";
  std::string device = "auto";  // --device auto|cpu|cuda (tools/device_choice.h)
  uint64_t bandwidth_buffer_bytes = uint64_t{1} << 30;
  int max_num_batched_tokens = 2048;  // prefill chunk, as the engine's default token budget
  std::string json;            // write the result here too
  // Structured output's cost per decode step (structured_bench.h): a {"schema", "instance"} file and
  // the tokenizer directory (default: the model's).
  std::string structured_schema;
  std::string tokenizer;
};

// Per-step means of a profile, in milliseconds (per layer / block where it says so).
struct LayerTimes {
  double gdn_ms_per_layer = 0;
  double attention_ms_per_layer = 0;
  double moe_ms_per_block = 0;
  double lm_head_ms = 0;
  double other_ms = 0;  // embedding, norms, residual adds
  double step_ms = 0;
};
LayerTimes layer_times(const model::StepProfile& p);

struct DecodeResult {
  int batch = 0;
  int steps = 0;
  double seconds = 0;
  double tok_s = 0;
  double efficiency = 0;           // active bytes/token x tok/s / read bandwidth (the batch-1 definition)
  double expected_step_bytes = 0;  // weights read per step with uniformly routed experts
  double bandwidth_utilization = 0;  // expected_step_bytes x steps/s / read bandwidth
  LayerTimes layers;
  // With --structured-schema: the grammar work and the mask's extra sampling cost per step.
  std::optional<StructuredCost> structured;
};

struct ModelBenchResult {
  std::string model;
  // /proc/loadavg's 1-minute figure before and after the run (-1 where unreadable): other work on
  // the machine skews every number here, so the report carries it.
  double load_before = -1, load_after = -1;
  std::string description;  // layers, formats, kv dtype
  int threads = 1;
  std::string isa;
  std::string device;  // "device: cpu (...)": the --device decision and its reason
  Roofline roofline;  // the host's (not measured when the model runs on a CUDA device)
  // On a CUDA device: its copy bandwidth (device_bandwidth.h), what efficiency is quoted against there.
  std::optional<double> device_copy_gbs;
  double bandwidth_gbs() const { return device_copy_gbs ? *device_copy_gbs : roofline.read_gbs; }
  ActiveBytes bytes;
  int prompt_len = 0;
  double prefill_seconds = 0;
  double prefill_tok_s = 0;
  LayerTimes prefill_layers;  // the whole prefill (all its chunks) as one "step"
  std::vector<DecodeResult> decode;
  double structured_compile_seconds = -1;  // the schema's compile (vocabulary built), -1 without
  std::size_t structured_instance_tokens = 0;
};

ModelBenchResult run_model_bench(const ModelBenchOptions& options, std::ostream& log);

void print_model_bench(const ModelBenchResult& r, std::ostream& out);
std::string model_bench_json(const ModelBenchResult& r);  // pretty-printed JSON object

// Registers `bench model` on the `bench` subcommand.
void add_bench_model_command(CLI::App& bench);

}  // namespace fp4serve::tools::bench
