#include "tools/bench/random_dataset.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tools/bench/numpy_random.h"

namespace fp4serve::tools::bench {
namespace {

struct DecodedPrompt {
  std::string prompt;
  std::vector<std::int32_t> ids;
  std::int64_t mismatch = 0;
};

// gen_prompt_decode_to_target_len (vllm/benchmarks/dataset_utils.py).
DecodedPrompt decode_to_target_len(BenchTokenizer& tok, std::vector<std::int32_t> ids, std::size_t target,
                                   std::int64_t vocab_size, NumpyGenerator& rng) {
  DecodedPrompt out;
  int remaining = 10;
  while (true) {
    out.prompt = tok.decode(ids);
    ids = tok.encode(out.prompt);
    if (remaining <= 0) {
      if (ids.size() != target) out.mismatch = static_cast<std::int64_t>(ids.size()) - static_cast<std::int64_t>(target);
      break;
    }
    if (ids.size() == target) break;
    if (ids.size() < target) {
      for (std::int64_t v : rng.integers(0, vocab_size, target - ids.size())) ids.push_back(static_cast<std::int32_t>(v));
    } else {
      ids.resize(target);
    }
    --remaining;
  }
  out.ids = std::move(ids);
  return out;
}

}  // namespace

std::vector<SampleRequest> sample_random_requests(BenchTokenizer& tok, const RandomDatasetOptions& o,
                                                  std::int64_t* token_mismatch_total) {
  if (!(o.range_ratio >= 0.0 && o.range_ratio < 1.0)) {
    throw DatasetError("--random-range-ratio must be in [0, 1), got " + std::to_string(o.range_ratio));
  }
  if (o.num_requests < 1) throw DatasetError("--num-prompts must be at least 1");
  const int num_special = tok.num_special_tokens_to_add();
  const int real_input_len = std::max(0, o.input_len - num_special);
  const auto input_low = static_cast<std::int64_t>(std::floor(real_input_len * (1.0 - o.range_ratio)));
  const auto input_high = static_cast<std::int64_t>(std::ceil(real_input_len * (1.0 + o.range_ratio)));
  if (o.prefix_len + input_low < 1) {
    throw DatasetError("--random-input-len is too small: with tokenizer special tokens " + std::to_string(num_special) +
                       " and --random-range-ratio " + std::to_string(o.range_ratio) +
                       ", the minimum possible total input tokens (prefix + sampled) is " +
                       std::to_string(o.prefix_len + input_low) + ". Increase --random-input-len or --random-prefix-len.");
  }
  const auto output_low = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(o.output_len * (1.0 - o.range_ratio))));
  const auto output_high = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(o.output_len * (1.0 + o.range_ratio))));

  const std::int64_t vocab_size = tok.vocab_size();
  if (vocab_size < 1) throw DatasetError("the tokenizer reports an empty vocabulary");
  NumpyGenerator rng(o.seed);
  const auto n = static_cast<std::size_t>(o.num_requests);
  const auto input_lens = rng.integers(input_low, input_high + 1, n);
  const auto output_lens = rng.integers(output_low, output_high + 1, n);
  const auto offsets = rng.integers(0, vocab_size, n);

  // allowed_tokens = arange(vocab_size) minus the special ids, in ascending order (the order
  // Python's set of small ints iterates in).
  const auto special = tok.all_special_ids();
  const std::set<std::int32_t> prohibited(special.begin(), special.end());
  std::vector<std::int32_t> allowed;
  allowed.reserve(static_cast<std::size_t>(vocab_size));
  for (std::int64_t id = 0; id < vocab_size; ++id) {
    if (!prohibited.count(static_cast<std::int32_t>(id))) allowed.push_back(static_cast<std::int32_t>(id));
  }
  const auto n_allowed = static_cast<std::int64_t>(allowed.size());

  std::vector<std::int32_t> prefix;
  if (o.prefix_len > 0) {
    for (std::int64_t i : rng.integers(0, n_allowed, static_cast<std::size_t>(o.prefix_len))) prefix.push_back(allowed[i]);
  }

  std::vector<SampleRequest> requests;
  requests.reserve(n);
  std::int64_t mismatch_total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> seq = prefix;
    for (std::int64_t k = 0; k < input_lens[i]; ++k) {
      seq.push_back(allowed[(offsets[i] + static_cast<std::int64_t>(i) + k) % n_allowed]);
    }
    const auto target = static_cast<std::size_t>(o.prefix_len + input_lens[i]);
    DecodedPrompt p = decode_to_target_len(tok, std::move(seq), target, vocab_size, rng);
    mismatch_total += p.mismatch;
    requests.push_back({std::move(p.prompt), static_cast<int>(p.ids.size()), static_cast<int>(output_lens[i]),
                        o.request_id_prefix + std::to_string(i)});
  }
  if (token_mismatch_total != nullptr) *token_mismatch_total = mismatch_total;
  return requests;
}

}  // namespace fp4serve::tools::bench
