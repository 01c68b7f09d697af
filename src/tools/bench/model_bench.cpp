#include "tools/bench/model_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "checkpoint/weight_loader.h"
#include "tools/bench/device_bandwidth.h"
#include "tools/device_choice.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/thread_pool.h"
#include "model/paged_kv_cache.h"
#include "model/qwen3_5_moe.h"
#include "model/state_arena.h"
#include "tokenizer/tokenizer.h"

namespace fp4serve::tools::bench {
namespace {

using clock_type = std::chrono::steady_clock;

struct ModelBenchError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

kernels::KvDtype resolve_kv_dtype(const std::string& flag, const LoadedCheckpoint& ck) {
  if (flag == "auto") {
    return ck.quant_config().kv_cache() == KvCacheQuant::kFP8 ? kernels::KvDtype::kFp8E4M3 : kernels::KvDtype::kBf16;
  }
  if (flag == "fp8" || flag == "fp8_e4m3") return kernels::KvDtype::kFp8E4M3;
  if (flag == "bfloat16" || flag == "bf16") return kernels::KvDtype::kBf16;
  throw ModelBenchError("--kv-cache-dtype " + flag + " is not supported: use auto, bfloat16, fp8 or fp8_e4m3");
}

// Deterministic token ids spread over the vocabulary (an LCG; the model's output does not matter).
std::vector<int32_t> synthetic_tokens(int64_t n, int64_t vocab, uint32_t seed) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& id : ids) {
    s = s * 1664525u + 1013904223u;
    id = static_cast<int32_t>((s >> 8) % static_cast<uint32_t>(vocab));
  }
  return ids;
}

int32_t argmax_row(const float* logits, int64_t row, int64_t vocab) {
  const float* p = logits + row * vocab;
  return static_cast<int32_t>(std::max_element(p, p + vocab) - p);
}

// The logits rows in host memory: the view itself on a host-memory backend, else a copy.
const float* host_logits(const kernels::Backend& be, const kernels::TensorView& logits, std::vector<float>& copy) {
  if (logits.device == kernels::Device::kCpu) return logits.as<const float>();
  copy.resize(static_cast<size_t>(logits.numel()));
  const_cast<kernels::Backend&>(be).download(copy.data(), logits);
  return copy.data();
}

// The memory of B sequences the way engine::ModelRunner holds it: a paged KV cache with a block
// table per sequence and one GDN state slot each.
class BenchSequences {
 public:
  BenchSequences(const model::Qwen35MoeModel& m, int count, int64_t max_tokens, kernels::KvDtype kv_dtype)
      : attn_layers_(static_cast<int>(m.config().num_full_attention_layers())) {
    const ModelConfig& c = m.config();
    const int64_t blocks_per_seq = (max_tokens + kBlockSize - 1) / kBlockSize;
    const int gdn_layers = static_cast<int>(c.num_linear_attention_layers());
    kv_ = model::PagedKvCache(m.backend(), attn_layers_, static_cast<int>(blocks_per_seq * count), kBlockSize,
                              static_cast<int>(c.num_key_value_heads), static_cast<int>(c.head_dim), kv_dtype);
    slots_ = model::GdnStateArena(m.backend(), count, gdn_layers, m.gdn_dims());
    tables_.resize(static_cast<size_t>(count));
    gdn_.resize(static_cast<size_t>(count));
    kv_views_.resize(static_cast<size_t>(count));
    for (int s = 0; s < count; ++s) {
      for (int64_t b = 0; b < blocks_per_seq; ++b) tables_[s].push_back(static_cast<int32_t>(s * blocks_per_seq + b));
      gdn_[s].resize(static_cast<size_t>(gdn_layers));
      slots_.refs(s, gdn_[s]);
      for (int l = 0; l < attn_layers_; ++l) kv_views_[s].push_back(kv_.view(l, tables_[s], 1.0f, 1.0f));
    }
    pos_.assign(static_cast<size_t>(count), 0);
  }

  // One step entry for sequence s with these new tokens (advances its position).
  model::BatchSequence entry(int s, std::span<const int32_t> tokens, bool logits) {
    model::BatchSequence b;
    b.tokens = tokens;
    b.pos0 = pos_[s];
    b.gdn = gdn_[s];
    b.kv = kv_views_[s];
    b.logits = logits ? model::BatchSequence::Logits::kLast : model::BatchSequence::Logits::kNone;
    pos_[s] += static_cast<int64_t>(tokens.size());
    return b;
  }

 private:
  static constexpr int kBlockSize = 16;
  int attn_layers_;
  model::PagedKvCache kv_;
  model::GdnStateArena slots_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<kernels::GdnStateRef>> gdn_;
  std::vector<std::vector<kernels::KvView>> kv_views_;
  std::vector<int64_t> pos_;
};

double load_average_1min() {
  std::ifstream f("/proc/loadavg");
  double v = -1;
  if (!(f >> v)) return -1;
  return v;
}

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

std::string describe_model(const LoadedCheckpoint& ck, kernels::KvDtype kv) {
  const ModelConfig& c = ck.config();
  std::string formats;
  for (const PlannedModule& m : ck.plan().modules) {
    if (m.kind != ModuleKind::kRoutedExperts && m.kind != ModuleKind::kLinear) continue;
    const std::string f = m.format.name();
    if (formats.find(f) == std::string::npos) formats += (formats.empty() ? "" : "+") + f;
  }
  return fmt::format("{} layers ({} GDN + {} attention), hidden {}, {} experts top-{}, vocab {}; linears {}; KV {}",
                     c.num_hidden_layers, c.num_linear_attention_layers(), c.num_full_attention_layers(),
                     c.hidden_size, c.num_experts, c.num_experts_per_tok, c.vocab_size, formats,
                     kv == kernels::KvDtype::kFp8E4M3 ? "fp8_e4m3" : "bf16");
}

void check_options(const ModelBenchOptions& o) {
  if (o.prompt_len < 1) throw ModelBenchError("--prompt-len must be at least 1");
  if (o.decode_steps < 1) throw ModelBenchError("--decode-steps must be at least 1");
  if (o.batches.empty()) throw ModelBenchError("--batch needs at least one batch size");
  for (int b : o.batches)
    if (b < 1) throw ModelBenchError("--batch sizes must be positive, got " + std::to_string(b));
  if (o.max_num_batched_tokens < 1) throw ModelBenchError("--max-num-batched-tokens must be positive");
}

}  // namespace

LayerTimes layer_times(const model::StepProfile& p) {
  LayerTimes t;
  const double steps = static_cast<double>(std::max<int64_t>(1, p.steps));
  auto per = [](double s, int64_t n) { return n > 0 ? s * 1e3 / static_cast<double>(n) : 0.0; };
  t.gdn_ms_per_layer = per(p.gdn_s, p.gdn_layers);
  t.attention_ms_per_layer = per(p.attention_s, p.attention_layers);
  t.moe_ms_per_block = per(p.moe_s, p.moe_blocks);
  t.lm_head_ms = p.lm_head_s * 1e3 / steps;
  t.other_ms = p.other_s() * 1e3 / steps;
  t.step_ms = p.total_s * 1e3 / steps;
  return t;
}

ModelBenchResult run_model_bench(const ModelBenchOptions& o, std::ostream& log) {
  check_options(o);
  // The device first: --device cuda without a GPU fails before the roofline and the load.
  DeviceChoice device = choose_device(o.device, probe_cuda());
  // structured_bench.h samples host copies of the logits rows through the backend: CPU views only.
  if (device.kind == DeviceKind::kCuda && !o.structured_schema.empty())
    throw std::runtime_error("--structured-schema measures on host logits rows: add --device cpu");
  if (o.threads > 0) kernels::cpu::set_num_threads(o.threads);
  ModelBenchResult r;
  r.model = o.model;
  r.threads = kernels::cpu::num_threads();
  r.isa = std::string(kernels::cpu::isa_name(kernels::cpu::active_isa()));
  r.load_before = load_average_1min();

  if (device.kind == DeviceKind::kCpu) {
    log << "measuring the roofline (" << (o.bandwidth_buffer_bytes >> 20) << " MiB read buffer, " << r.threads
        << " threads)..." << std::endl;
    r.roofline = measure_roofline(o.bandwidth_buffer_bytes);
  }

  log << "loading " << o.model << "..." << std::endl;
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(o.model, LoadOptions{"main", true, false}));
  std::shared_ptr<kernels::Backend> backend = make_backend(device, o.device == "auto");
  if (device.kind == DeviceKind::kCuda) {
    // The device's roofline, before the weights take its memory (2 GiB, freed again).
    log << "measuring the device's copy bandwidth (1 GiB device to device)..." << std::endl;
    r.device_copy_gbs = measure_device_copy_gbs(*backend);
  }
  expect_weight_bytes(*backend, planned_weight_bytes(*ck, false));
  const model::Qwen35MoeModel m(ck, backend);
  r.device = device.log_line;
  log << r.device << std::endl;
  const kernels::KvDtype kv = resolve_kv_dtype(o.kv_cache_dtype, *ck);
  r.description = describe_model(*ck, kv);
  r.bytes = active_bytes(ck->plan(), ck->config());
  const int64_t vocab = m.vocab_size();

  // Prefill: one sequence, chunked by the engine's token budget; logits for the last token only.
  {
    log << "prefill of " << o.prompt_len << " tokens..." << std::endl;
    r.prompt_len = o.prompt_len;
    BenchSequences seqs(m, 1, o.prompt_len, kv);
    const std::vector<int32_t> prompt = synthetic_tokens(o.prompt_len, vocab, 1);
    // One workspace for the run, as the engine's model runner holds one.
    model::StepWorkspace ws(m.backend(), m.config(),
                            kernels::StepLimits{o.max_num_batched_tokens, 1, 1, o.prompt_len});
    model::StepProfile prof;
    const auto t0 = clock_type::now();
    for (int64_t at = 0; at < o.prompt_len; at += o.max_num_batched_tokens) {
      const int64_t n = std::min<int64_t>(o.max_num_batched_tokens, o.prompt_len - at);
      const bool last = at + n == o.prompt_len;
      std::vector<model::BatchSequence> step{seqs.entry(0, std::span(prompt).subspan(at, n), last)};
      m.forward_step(step, ws, &prof);
    }
    r.prefill_seconds = seconds_since(t0);
    r.prefill_tok_s = o.prompt_len / r.prefill_seconds;
    prof.steps = 1;  // report the prefill as one step
    r.prefill_layers = layer_times(prof);
  }

  std::unique_ptr<StructuredBench> structured;
  if (!o.structured_schema.empty()) {
    const std::string dir = o.tokenizer.empty() ? o.model : o.tokenizer;
    std::shared_ptr<const tokenizer::Tokenizer> tok = tokenizer::Tokenizer::load(dir);
    std::vector<int32_t> stop;
    if (const int32_t eos = tok->token_to_id("<|im_end|>"); eos >= 0 && eos < vocab) stop.push_back(eos);
    log << "structured output: compiling " << o.structured_schema << " against " << dir << "..." << std::endl;
    structured = std::make_unique<StructuredBench>(o.structured_schema, tok, vocab, stop);
    r.structured_compile_seconds = structured->compile_seconds();
    r.structured_instance_tokens = structured->instance_tokens();
  }

  for (int B : o.batches) {
    log << "decode at batch " << B << "..." << std::endl;
    constexpr int kWarmupSteps = 1;
    BenchSequences seqs(m, B, o.decode_prompt_len + kWarmupSteps + o.decode_steps, kv);
    std::vector<std::vector<int32_t>> prompts;
    for (int s = 0; s < B; ++s) prompts.push_back(synthetic_tokens(o.decode_prompt_len, vocab, 100 + s));
    std::vector<model::BatchSequence> step;
    for (int s = 0; s < B; ++s) step.push_back(seqs.entry(s, prompts[s], true));
    model::StepWorkspace ws(m.backend(), m.config(),
                            kernels::StepLimits{std::max<int64_t>(B * o.decode_prompt_len, B), B, B,
                                                o.decode_prompt_len + kWarmupSteps + o.decode_steps});
    std::vector<float> host_copy;
    kernels::TensorView logits = m.forward_step(step, ws);
    std::vector<int32_t> next(static_cast<size_t>(B));
    auto decode_step = [&](model::StepProfile* prof) {
      const float* rows = host_logits(m.backend(), logits, host_copy);
      for (int s = 0; s < B; ++s) next[s] = argmax_row(rows, s, vocab);
      step.clear();
      for (int s = 0; s < B; ++s) step.push_back(seqs.entry(s, std::span<const int32_t>(&next[s], 1), true));
      logits = m.forward_step(step, ws, prof);
    };
    for (int i = 0; i < kWarmupSteps; ++i) decode_step(nullptr);
    model::StepProfile prof;
    const auto t0 = clock_type::now();
    for (int i = 0; i < o.decode_steps; ++i) decode_step(&prof);
    DecodeResult d;
    d.batch = B;
    d.steps = o.decode_steps;
    d.seconds = seconds_since(t0);
    d.tok_s = static_cast<double>(B) * o.decode_steps / d.seconds;
    const double bw = r.bandwidth_gbs() * 1e9;
    d.efficiency = static_cast<double>(r.bytes.per_token) * d.tok_s / bw;
    d.expected_step_bytes = expected_step_bytes(r.bytes, B);
    d.bandwidth_utilization = d.expected_step_bytes * (o.decode_steps / d.seconds) / bw;
    d.layers = layer_times(prof);
    if (structured) {
      const float* rows = host_logits(m.backend(), logits, host_copy);
      std::vector<float> sample_rows(rows, rows + static_cast<std::size_t>(B) * static_cast<std::size_t>(vocab));
      d.structured = structured->measure(B, o.decode_steps, sample_rows, m.backend());
    }
    r.decode.push_back(d);
  }
  r.load_after = load_average_1min();
  return r;
}

}  // namespace fp4serve::tools::bench
