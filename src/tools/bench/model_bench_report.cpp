// `fp4serve bench model`'s table and JSON (model_bench.h).
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tools/bench/model_bench.h"

namespace fp4serve::tools::bench {
namespace {

nlohmann::json layers_json(const LayerTimes& t) {
  return {{"step_ms", t.step_ms},         {"gdn_ms_per_layer", t.gdn_ms_per_layer},
          {"attention_ms_per_layer", t.attention_ms_per_layer}, {"moe_ms_per_block", t.moe_ms_per_block},
          {"lm_head_ms", t.lm_head_ms},   {"other_ms", t.other_ms}};
}

std::string mb(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

}  // namespace

void print_model_bench(const ModelBenchResult& r, std::ostream& out) {
  const Roofline& rf = r.roofline;
  out << fmt::format("model: {}\n  {}\n", r.model, r.description);
  if (!r.device.empty()) out << r.device << "\n";
  out << fmt::format("threads: {}, {} kernels; load average (1 min) {:.2f} before, {:.2f} after\n", r.threads, r.isa,
                     r.load_before, r.load_after);
  if (r.device_copy_gbs) {
    out << fmt::format("roofline: device copy bandwidth {:.2f} GB/s (cudaMemcpy device to device, 1 GiB, read + "
                       "write)\n",
                       *r.device_copy_gbs);
  } else {
    out << fmt::format("roofline: read bandwidth {:.2f} GB/s ({} MiB buffer); fp32 FMA {:.1f} GFLOP/s ({})",
                       rf.read_gbs, rf.buffer_bytes >> 20, rf.fp32_fma_gflops, rf.fma_isa);
    if (rf.bf16_dot_gflops) out << fmt::format("; bf16 dot {:.1f} GFLOP/s (avx512_bf16)", *rf.bf16_dot_gflops);
    out << "\n";
  }
  const char* bw_name = r.device_copy_gbs ? "device copy bandwidth" : "read bandwidth";
  const ActiveBytes& b = r.bytes;
  out << fmt::format("active bytes per token: {} ({}: routed experts {} = {} of {} per layer, embedding row {}, "
                     "every other weight {})\n",
                     b.per_token, mb(static_cast<double>(b.per_token)), mb(static_cast<double>(b.routed_experts)),
                     b.top_k, b.num_experts, b.embedding_row, mb(static_cast<double>(b.shared)));
  out << fmt::format("prefill: {} tokens in {:.3f} s = {:.2f} tok/s\n", r.prompt_len, r.prefill_seconds,
                     r.prefill_tok_s);
  out << fmt::format("decode ({} steps per batch size; efficiency = active bytes/token x tok/s / {}; "
                     "bw util = expected weight bytes/step x steps/s / {}):\n",
                     r.decode.empty() ? 0 : r.decode.front().steps, bw_name, bw_name);
  out << fmt::format("  {:>5} {:>10} {:>9} {:>10} {:>8} {:>12} {:>13} {:>12} {:>10} {:>9}\n", "batch", "tok/s", "ms/step",
                     "efficiency", "bw util", "GDN ms/layer", "attn ms/layer", "MoE ms/block", "lm_head ms", "other ms");
  auto row = [&out](const std::string& label, const std::string& tok_s, const std::string& eff, const std::string& bw,
                    const LayerTimes& t) {
    out << fmt::format("  {:>5} {:>10} {:>9.2f} {:>10} {:>8} {:>12.3f} {:>13.3f} {:>12.3f} {:>10.3f} {:>9.3f}\n", label,
                       tok_s, t.step_ms, eff, bw, t.gdn_ms_per_layer, t.attention_ms_per_layer, t.moe_ms_per_block,
                       t.lm_head_ms, t.other_ms);
  };
  for (const DecodeResult& d : r.decode) {
    row(std::to_string(d.batch), fmt::format("{:.2f}", d.tok_s), fmt::format("{:.3f}", d.efficiency),
        fmt::format("{:.3f}", d.bandwidth_utilization), d.layers);
  }
  if (r.structured_compile_seconds >= 0) {
    out << fmt::format("structured output (schema compiled in {:.3f} s; {} document tokens replayed per sequence): "
                       "per step, grammar = every sequence's matcher takes its token and fills its next mask "
                       "(engine thread), op = the sampling op with minus without the masks:\n",
                       r.structured_compile_seconds, r.structured_instance_tokens);
    out << fmt::format("  {:>5} {:>9} {:>11} {:>12} {:>10} {:>13}\n", "batch", "ms/step", "grammar ms", "op extra ms",
                       "overhead", "tok/s w/ mask");
    for (const DecodeResult& d : r.decode) {
      if (!d.structured) continue;
      const double step = 1000.0 * d.seconds / d.steps, extra = d.structured->extra_ms_per_step();
      out << fmt::format("  {:>5} {:>9.2f} {:>11.3f} {:>12.3f} {:>9.2f}% {:>13.2f}\n", d.batch, step,
                         d.structured->mask_ms_per_step,
                         d.structured->sample_masked_ms_per_step - d.structured->sample_ms_per_step,
                         100.0 * extra / step, d.batch * 1000.0 / (step + extra));
    }
  }
  out << "prefill per layer kind (whole prompt):\n";
  row("P" + std::to_string(r.prompt_len), fmt::format("{:.2f}", r.prefill_tok_s), "-", "-", r.prefill_layers);
}

std::string model_bench_json(const ModelBenchResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["description"] = r.description;
  j["threads"] = r.threads;
  j["isa"] = r.isa;
  j["device"] = r.device;
  j["load_average"] = {{"before", r.load_before}, {"after", r.load_after}};
  const Roofline& rf = r.roofline;
  j["roofline"] = {{"read_bandwidth_gbs", rf.read_gbs},
                   {"buffer_bytes", rf.buffer_bytes},
                   {"fp32_fma_gflops", rf.fp32_fma_gflops},
                   {"fma_isa", rf.fma_isa},
                   {"bf16_dot_gflops", rf.bf16_dot_gflops ? nlohmann::json(*rf.bf16_dot_gflops) : nlohmann::json()},
                   {"device_copy_gbs", r.device_copy_gbs ? nlohmann::json(*r.device_copy_gbs) : nlohmann::json()},
                   {"bandwidth_gbs", r.bandwidth_gbs()}};
  const ActiveBytes& b = r.bytes;
  j["active_bytes_per_token"] = b.per_token;
  j["active_bytes"] = {{"routed_experts", b.routed_experts}, {"one_expert_all_layers", b.one_expert_all_layers},
                       {"embedding_row", b.embedding_row}, {"other", b.shared},
                       {"num_experts", b.num_experts}, {"top_k", b.top_k}};
  j["prefill"] = {{"prompt_len", r.prompt_len}, {"seconds", r.prefill_seconds}, {"tok_s", r.prefill_tok_s},
                  {"layers", layers_json(r.prefill_layers)}};
  j["decode"] = nlohmann::json::array();
  for (const DecodeResult& d : r.decode) {
    j["decode"].push_back({{"batch", d.batch},
                           {"steps", d.steps},
                           {"seconds", d.seconds},
                           {"tok_s", d.tok_s},
                           {"efficiency", d.efficiency},
                           {"expected_step_bytes", d.expected_step_bytes},
                           {"bandwidth_utilization", d.bandwidth_utilization},
                           {"layers", layers_json(d.layers)}});
    if (d.structured) {
      j["decode"].back()["structured"] = {{"grammar_ms_per_step", d.structured->mask_ms_per_step},
                                          {"sample_ms_per_step", d.structured->sample_ms_per_step},
                                          {"sample_masked_ms_per_step", d.structured->sample_masked_ms_per_step}};
    }
  }
  if (r.structured_compile_seconds >= 0) j["structured_compile_seconds"] = r.structured_compile_seconds;
  return j.dump(2);
}

}  // namespace fp4serve::tools::bench
