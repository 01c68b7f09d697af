// `fp4serve bench serve`: the CLI of `vllm bench serve` (same flag names and defaults) in front of
// run_bench(). vLLM flags this load generator does not implement are refused by name with the
// reason, never silently ignored.
#include <CLI/CLI.hpp>

#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "tools/bench/bench_runner.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/vision_bench.h"
#include "tools/commands.h"

namespace fp4serve::tools {
namespace {

using bench::BenchConfig;
using bench::BenchConfigError;

// vLLM `bench serve` flags with no fp4serve counterpart, and why.
const std::map<std::string, std::string>& unsupported_vllm_flags() {
  static const std::map<std::string, std::string> m = {
      {"--dataset-path", "only the random dataset is implemented"},
      {"--no-stream", "the benchmark always streams"},
      {"--use-beam-search", "fp4serve does not implement beam search"},
      {"--profile", "fp4serve has no /start_profile endpoint"},
      {"--lora-modules", "fp4serve serves no LoRA adapters"},
      {"--lora-assignment", "fp4serve serves no LoRA adapters"},
      {"--ramp-up-strategy", "ramp-up traffic is not implemented"},
      {"--ramp-up-start-rps", "ramp-up traffic is not implemented"},
      {"--ramp-up-end-rps", "ramp-up traffic is not implemented"},
      {"--self-timed", "only the timed_trace dataset uses it, and it is not implemented"},
      {"--no-self-timed", "only the timed_trace dataset uses it, and it is not implemented"},
      {"--probe-request-rate", "probe requests are not implemented"},
      {"--plot-timeline", "use --plot FILE.svg (tokens/s, KV usage, TTFT and ITL histograms)"},
      {"--timeline-itl-thresholds", "use --plot FILE.svg"},
      {"--plot-dataset-stats", "use --plot FILE.svg"},
      {"--chat-template-kwargs", "only datasets rendered client-side use it; random sends raw text"},
      {"--skip-tokenizer-init", "the random dataset needs a tokenizer (the server's is used by default)"},
      {"--insecure", "https is not supported"},
      {"--no-oversample", "only the random dataset is implemented"},
      {"--disable-shuffle", "only the random dataset is implemented"},
      {"--random-batch-size", "embedding batches are not implemented"},
  };
  return m;
}

const std::vector<std::string>& unsupported_dataset_prefixes() {
  static const std::vector<std::string> p = {"--sharegpt-", "--sonnet-",         "--hf-",       "--custom-",
                                             "--random-mm-", "--prefix-repetition-", "--spec-bench-", "--blazedit-",
                                             "--asr-",      "--burstgpt-",        "--random-rerank-"};
  return p;
}

// allow_extras() collects what CLI11 did not recognise; each one is an error with an explanation.
void refuse_extras(const std::vector<std::string>& extras) {
  for (const std::string& item : extras) {
    if (item.rfind("--", 0) != 0) {
      throw BenchConfigError("fp4serve bench serve: unexpected argument '" + item + "'");
    }
    const std::string name = item.substr(0, item.find('='));
    if (const auto it = unsupported_vllm_flags().find(name); it != unsupported_vllm_flags().end()) {
      throw BenchConfigError("vLLM's " + name + " is not supported by fp4serve bench serve: " + it->second);
    }
    for (const std::string& prefix : unsupported_dataset_prefixes()) {
      if (name.rfind(prefix, 0) == 0) {
        throw BenchConfigError("vLLM's " + name + " belongs to a dataset fp4serve bench serve does not implement (only --dataset-name random)");
      }
    }
    if (name.find('_') != std::string::npos) {
      std::string dashed = name;
      for (std::size_t i = 2; i < dashed.size(); ++i) dashed[i] = dashed[i] == '_' ? '-' : dashed[i];
      throw BenchConfigError("fp4serve bench serve: unknown option " + name + " (flags are spelled with dashes: " + dashed + ")");
    }
    throw BenchConfigError("fp4serve bench serve: unknown option " + name + " (see fp4serve bench serve --help)");
  }
}

struct CliState {
  BenchConfig cfg;
  std::string base_url, model, served_model_name, tokenizer, label, request_id_prefix, percentile_metrics, extra_body,
      result_dir, result_filename, plot, tokenizer_mode = "auto";
  int input_len = 0, output_len = 0, max_concurrency = 0, logprobs = 0, top_k = 0;
  double top_p = 0, min_p = 0, temperature = 0, frequency_penalty = 0, presence_penalty = 0, repetition_penalty = 0;
  bool trust_remote_code = false;
};

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks; `fp4serve bench serve` is `vllm bench serve`, `fp4serve bench model` the in-process model speed");
  bench->require_subcommand(1);
  auto* cmd = bench->add_subcommand(
      "serve", "load generator matching `vllm bench serve` (random dataset, streaming completions or chat)");
  cmd->allow_extras();
  auto s = std::make_shared<CliState>();
  BenchConfig& c = s->cfg;
  std::map<std::string, CLI::Option*> o;

  cmd->add_option("--backend", c.backend, "openai | vllm (completions) or openai-chat")->capture_default_str();
  o["base_url"] = cmd->add_option("--base-url", s->base_url, "server base url (else http://HOST:PORT)");
  cmd->add_option("--host", c.host)->capture_default_str();
  cmd->add_option("--port", c.port)->capture_default_str();
  cmd->add_option("--endpoint", c.endpoint, "API endpoint")->capture_default_str();
  cmd->add_option("--header", c.header, "KEY=VALUE headers sent with each request")->expected(0, CLI::detail::expected_max_vector_size);
  o["model"] = cmd->add_option("--model", s->model, "model name (default: the first of /v1/models)");
  o["served_model_name"] = cmd->add_option("--served-model-name", s->served_model_name, "name sent in 'model'");
  o["tokenizer"] = cmd->add_option("--tokenizer", s->tokenizer,
                                   "local tokenizer directory (default: the server's /tokenize and /detokenize)");
  cmd->add_option("--tokenizer-mode", s->tokenizer_mode, "accepted for compatibility (auto or hf)");
  cmd->add_flag("--trust-remote-code", s->trust_remote_code, "accepted for compatibility");
  o["label"] = cmd->add_option("--label", s->label, "result label (default: the backend)");

  cmd->add_option("--dataset-name", c.dataset_name, "only 'random'")->capture_default_str();
  cmd->add_option("--num-prompts", c.num_prompts)->capture_default_str();
  o["input_len"] = cmd->add_option("--input-len", s->input_len, "maps to --random-input-len");
  o["output_len"] = cmd->add_option("--output-len", s->output_len, "maps to --random-output-len");
  cmd->add_option("--random-input-len", c.random_input_len)->capture_default_str();
  cmd->add_option("--random-output-len", c.random_output_len)->capture_default_str();
  cmd->add_option("--random-range-ratio", c.random_range_ratio, "in [0, 1)")->capture_default_str();
  cmd->add_option("--random-prefix-len", c.random_prefix_len)->capture_default_str();
  cmd->add_option("--seed", c.seed)->capture_default_str();

  o["max_concurrency"] = cmd->add_option("--max-concurrency", s->max_concurrency, "maximum concurrent requests");
  cmd->add_option("--request-rate", c.request_rate, "requests/s (inf: all at t=0)")->capture_default_str();
  cmd->add_option("--burstiness", c.burstiness, "1 = Poisson, else gamma")->capture_default_str();
  cmd->add_flag("--ignore-eos", c.ignore_eos, "always on for the random dataset, as in vLLM");
  cmd->add_option("--num-warmups", c.num_warmups)->capture_default_str();
  cmd->add_option("--ready-check-timeout-sec", c.ready_check_timeout_sec)->capture_default_str();
  o["request_id_prefix"] = cmd->add_option("--request-id-prefix", s->request_id_prefix, "default bench-<8 hex>-");
  o["logprobs"] = cmd->add_option("--logprobs", s->logprobs);
  cmd->add_flag("--disable-tqdm", c.disable_tqdm, "accepted (no progress bar is drawn)");

  o["percentile_metrics"] = cmd->add_option("--percentile-metrics", s->percentile_metrics,
                                            "ttft,tpot,itl,e2el,client_queue_time,e2el_including_client_queue");
  cmd->add_option("--metric-percentiles", c.metric_percentiles)->capture_default_str();
  cmd->add_option("--goodput", c.goodput, "SLOs KEY:ms (ttft, tpot, e2el)");

  o["top_p"] = cmd->add_option("--top-p", s->top_p);
  o["top_k"] = cmd->add_option("--top-k", s->top_k);
  o["min_p"] = cmd->add_option("--min-p", s->min_p);
  o["temperature"] = cmd->add_option("--temperature", s->temperature);
  o["frequency_penalty"] = cmd->add_option("--frequency-penalty", s->frequency_penalty);
  o["presence_penalty"] = cmd->add_option("--presence-penalty", s->presence_penalty);
  o["repetition_penalty"] = cmd->add_option("--repetition-penalty", s->repetition_penalty);
  o["extra_body"] = cmd->add_option("--extra-body", s->extra_body, "JSON object merged into each request");

  cmd->add_flag("--save-result", c.save_result);
  cmd->add_flag("--save-detailed", c.save_detailed);
  cmd->add_flag("--append-result", c.append_result);
  cmd->add_option("--metadata", c.metadata, "KEY=VALUE saved in the result")->expected(0, CLI::detail::expected_max_vector_size);
  o["result_dir"] = cmd->add_option("--result-dir", s->result_dir);
  o["result_filename"] = cmd->add_option("--result-filename", s->result_filename);
  o["plot"] = cmd->add_option("--plot", s->plot, "write an SVG: tokens/s and KV usage over time, TTFT and ITL histograms");
  cmd->add_option("--kv-sample-interval", c.kv_sample_interval_s, "seconds between /metrics polls")->capture_default_str();

  cmd->callback([cmd, s, o] {
    refuse_extras(cmd->remaining());
    if (s->tokenizer_mode != "auto" && s->tokenizer_mode != "hf") {
      throw BenchConfigError("--tokenizer-mode " + s->tokenizer_mode + " is not supported (auto or hf)");
    }
    BenchConfig cfg = s->cfg;
    const auto has = [&o](const char* k) { return o.at(k)->count() > 0; };
    if (has("base_url")) cfg.base_url = s->base_url;
    if (has("model")) cfg.model = s->model;
    if (has("served_model_name")) cfg.served_model_name = s->served_model_name;
    if (has("tokenizer")) cfg.tokenizer = s->tokenizer;
    if (has("label")) cfg.label = s->label;
    if (has("input_len")) cfg.input_len = s->input_len;
    if (has("output_len")) cfg.output_len = s->output_len;
    if (has("max_concurrency")) cfg.max_concurrency = s->max_concurrency;
    if (has("request_id_prefix")) cfg.request_id_prefix = s->request_id_prefix;
    if (has("logprobs")) cfg.logprobs = s->logprobs;
    if (has("percentile_metrics")) cfg.percentile_metrics = s->percentile_metrics;
    if (has("top_p")) cfg.top_p = s->top_p;
    if (has("top_k")) cfg.top_k = s->top_k;
    if (has("min_p")) cfg.min_p = s->min_p;
    if (has("temperature")) cfg.temperature = s->temperature;
    if (has("frequency_penalty")) cfg.frequency_penalty = s->frequency_penalty;
    if (has("presence_penalty")) cfg.presence_penalty = s->presence_penalty;
    if (has("repetition_penalty")) cfg.repetition_penalty = s->repetition_penalty;
    if (has("extra_body")) cfg.extra_body = s->extra_body;
    if (has("result_dir")) cfg.result_dir = s->result_dir;
    if (has("result_filename")) cfg.result_filename = s->result_filename;
    if (has("plot")) cfg.plot = s->plot;
    bench::run_bench(cfg, std::cout);
  });
  bench::add_bench_model_command(*bench);
  bench::add_bench_vision_command(*bench);
}

}  // namespace fp4serve::tools
