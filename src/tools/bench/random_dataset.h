// vLLM's RandomDataset (vllm/benchmarks/datasets.py) for `--dataset-name random`: lengths drawn
// uniformly around --random-input-len/--random-output-len with --random-range-ratio, a shared
// random prefix, then a run of consecutive vocabulary ids per request, decoded to text and
// re-encoded until the token count is right (gen_prompt_decode_to_target_len, 10 retries).
// Every draw goes through numpy's default_rng(seed) reimplemented bit for bit, so a local
// tokenizer identical to HF's gives vLLM's exact prompts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/bench/bench_tokenizer.h"

namespace fp4serve::tools::bench {

struct SampleRequest {
  std::string prompt;
  int prompt_len = 0;
  int expected_output_len = 0;
  std::string request_id;
};

struct RandomDatasetOptions {
  int num_requests = 1000;
  int input_len = 1024;
  int output_len = 128;
  double range_ratio = 0.0;
  int prefix_len = 0;
  std::uint64_t seed = 0;
  std::string request_id_prefix;
};

class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<SampleRequest> sample_random_requests(BenchTokenizer& tokenizer, const RandomDatasetOptions& opts,
                                                  std::int64_t* token_mismatch_total = nullptr);

}  // namespace fp4serve::tools::bench
