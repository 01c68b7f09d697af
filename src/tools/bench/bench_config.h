// Everything `fp4serve bench serve` takes, named after vLLM's `vllm bench serve` arguments.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace fp4serve::tools::bench {

struct BenchConfig {
  std::string backend = "openai";  // openai | vllm (completions), openai-chat (chat)
  std::optional<std::string> base_url;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";
  std::vector<std::string> header;  // KEY=VALUE
  std::optional<std::string> model;
  std::optional<std::string> served_model_name;
  std::optional<std::string> tokenizer;  // a local tokenizer directory; default: ask the server
  std::optional<std::string> label;

  std::string dataset_name = "random";
  int num_prompts = 1000;
  std::optional<int> input_len, output_len;
  int random_input_len = 1024;
  int random_output_len = 128;
  double random_range_ratio = 0.0;
  int random_prefix_len = 0;
  std::uint64_t seed = 0;

  std::optional<int> max_concurrency;
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  bool ignore_eos = false;
  int num_warmups = 0;
  int ready_check_timeout_sec = 0;
  std::optional<std::string> request_id_prefix;  // default bench-<8 hex>-
  std::optional<int> logprobs;

  std::optional<std::string> percentile_metrics;  // default ttft,tpot,itl
  std::string metric_percentiles = "99";
  std::vector<std::string> goodput;               // KEY:ms

  std::optional<double> top_p, min_p, temperature, frequency_penalty, presence_penalty, repetition_penalty;
  std::optional<int> top_k;
  std::optional<std::string> extra_body;  // JSON object

  bool save_result = false;
  bool save_detailed = false;
  bool append_result = false;
  std::vector<std::string> metadata;  // KEY=VALUE
  std::optional<std::string> result_dir;
  std::optional<std::string> result_filename;
  bool disable_tqdm = false;

  // fp4serve additions
  std::optional<std::string> plot;  // SVG file
  double kv_sample_interval_s = 0.2;
};

}  // namespace fp4serve::tools::bench
