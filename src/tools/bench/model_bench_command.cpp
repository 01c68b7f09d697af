// The CLI of `fp4serve bench model` (model_bench.h).
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "tools/bench/model_bench.h"
#include "tools/device_choice.h"

namespace fp4serve::tools::bench {

void add_bench_model_command(CLI::App& bench) {
  auto o = std::make_shared<ModelBenchOptions>();
  auto buffer_mib = std::make_shared<int>(0);
  auto* cmd = bench.add_subcommand(
      "model", "in-process model speed with the roofline measured in the same run: prefill and decode tok/s, "
               "time per layer kind, decode efficiency");
  cmd->add_option("--model,-m", o->model, "model directory or Hugging Face id in the local cache")->required();
  cmd->add_option("--prompt-len", o->prompt_len, "prefill prompt tokens")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o->batches, "decode batch sizes, comma separated")->delimiter(',')->capture_default_str();
  cmd->add_option("--decode-steps", o->decode_steps, "timed decode steps per batch size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--decode-prompt-len", o->decode_prompt_len, "prompt tokens of each decode sequence (untimed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::PositiveNumber);
  add_device_flag(*cmd, o->device);
  cmd->add_option("--kv-cache-dtype", o->kv_cache_dtype, "auto|bfloat16|fp8|fp8_e4m3 (auto: the checkpoint's)")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "prefill chunk (the engine's token budget)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bandwidth-buffer-mib", *buffer_mib,
                  "buffer streamed for the read bandwidth (default: 4x the last-level cache, at least 1024)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--json", o->json, "also write the results as JSON to this file");
  cmd->add_option("--structured-schema", o->structured_schema,
                  "also measure structured output's cost per decode step: a JSON file {\"schema\", \"instance\"} "
                  "(bench/data/structured_order.json)");
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer directory for --structured-schema (default: the model's)");
  cmd->callback([o, buffer_mib] {
    ModelBenchOptions opts = *o;
    opts.bandwidth_buffer_bytes =
        *buffer_mib > 0 ? static_cast<uint64_t>(*buffer_mib) << 20 : default_bandwidth_buffer_bytes();
    const ModelBenchResult r = run_model_bench(opts, std::cerr);
    print_model_bench(r, std::cout);
    if (!opts.json.empty()) {
      std::ofstream f(opts.json);
      if (!f) throw std::runtime_error("--json: cannot write " + opts.json);
      f << model_bench_json(r) << "\n";
      if (!f) throw std::runtime_error("--json: error writing " + opts.json);
    }
  });
}

}  // namespace fp4serve::tools::bench
