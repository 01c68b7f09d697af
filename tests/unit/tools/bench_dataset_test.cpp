// The random dataset: lengths, offsets and prefix as numpy draws them for a seed, and the
// decode/encode length adjustment of gen_prompt_decode_to_target_len.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tools/bench/random_dataset.h"

namespace fp4serve::tools::bench {
namespace {

// Ids are words "t<id>"; decode joins them with spaces, encode splits them back: exact round trip.
class WordTokenizer : public BenchTokenizer {
 public:
  explicit WordTokenizer(int merge_every = 0) : merge_every_(merge_every) {}
  std::vector<std::int32_t> encode(const std::string& text) override {
    std::vector<std::int32_t> ids;
    std::istringstream in(text);
    std::string w;
    while (in >> w) ids.push_back(std::stoi(w.substr(1)));
    // Simulates a tokenizer that merges some neighbours: every merge_every-th token disappears.
    if (merge_every_ > 0 && ids.size() >= static_cast<std::size_t>(merge_every_) && calls_++ == 0) {
      ids.erase(ids.begin() + merge_every_ - 1);
    }
    return ids;
  }
  std::string decode(const std::vector<std::int32_t>& ids) override {
    std::string s;
    for (auto id : ids) s += (s.empty() ? "t" : " t") + std::to_string(id);
    return s;
  }
  std::int64_t vocab_size() override { return 990; }
  std::vector<std::int32_t> all_special_ids() override { return {}; }
  int num_special_tokens_to_add() override { return 0; }

 private:
  int merge_every_;
  int calls_ = 0;
};

std::vector<std::int32_t> ids_of(const std::string& prompt) {
  WordTokenizer t;
  return t.encode(prompt);
}

TEST(BenchRandomDataset, LengthsOffsetsAndPrefixFollowNumpyDraws) {
  WordTokenizer tok;
  RandomDatasetOptions o;
  o.num_requests = 6;
  o.input_len = 64;
  o.output_len = 32;
  o.range_ratio = 0.5;
  o.prefix_len = 3;
  o.seed = 7;
  o.request_id_prefix = "bench-x-";
  const auto reqs = sample_random_requests(tok, o);
  // numpy: rng=default_rng(7); integers(32,97,6); integers(16,49,6); integers(0,990,6); integers(0,990,3)
  const std::vector<int> input_lens = {93, 72, 76, 90, 69, 82};
  const std::vector<int> output_lens = {43, 23, 17, 25, 25, 44};
  const std::vector<int> first_inner = {903, 6, 496, 816, 134, 794};  // (offset_i + i) % 990
  ASSERT_EQ(reqs.size(), 6u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(reqs[i].prompt_len, 3 + input_lens[i]);
    EXPECT_EQ(reqs[i].expected_output_len, output_lens[i]);
    EXPECT_EQ(reqs[i].request_id, "bench-x-" + std::to_string(i));
    const auto ids = ids_of(reqs[i].prompt);
    ASSERT_EQ(static_cast<int>(ids.size()), reqs[i].prompt_len);
    EXPECT_EQ(ids[0], 117);
    EXPECT_EQ(ids[1], 463);
    EXPECT_EQ(ids[2], 808);
    EXPECT_EQ(ids[3], first_inner[i]);
    EXPECT_EQ(ids[4], (first_inner[i] + 1) % 990);  // a run of consecutive ids
  }
}

TEST(BenchRandomDataset, ZeroRangeRatioGivesExactLengths) {
  WordTokenizer tok;
  RandomDatasetOptions o;
  o.num_requests = 5;
  o.input_len = 20;
  o.output_len = 7;
  const auto reqs = sample_random_requests(tok, o);
  for (const auto& r : reqs) {
    EXPECT_EQ(r.prompt_len, 20);
    EXPECT_EQ(r.expected_output_len, 7);
  }
}

TEST(BenchRandomDataset, ReencodingShortfallIsRefilledToTheTarget) {
  WordTokenizer tok(/*merge_every=*/5);  // the first re-encode loses a token
  RandomDatasetOptions o;
  o.num_requests = 1;
  o.input_len = 12;
  o.output_len = 4;
  const auto reqs = sample_random_requests(tok, o);
  EXPECT_EQ(reqs[0].prompt_len, 12);
  EXPECT_EQ(ids_of(reqs[0].prompt).size(), 12u);
}

std::uint64_t fnv1a64(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

// The real Qwen3.5 tokenizer: the prompts must be byte for byte those vLLM builds. Expected values
// from tools/reference/bench_random_dataset_reference.py (HF tokenizer + numpy, vLLM's algorithm).
TEST(BenchRandomDataset, QwenPromptsMatchVllm) {
  const auto dir = std::filesystem::path(FP4SERVE_SOURCE_DIR) / ".cache" / "tokenizers" / "qwen3.5";
  ASSERT_TRUE(std::filesystem::exists(dir / "tokenizer.json"))
      << "The qwen3.5 tokenizer is not installed in " << dir << ". Run tools/reference/fetch_tokenizers.sh.";
  LocalBenchTokenizer tok(dir.string());
  EXPECT_EQ(tok.vocab_size(), 248044);
  RandomDatasetOptions o;
  o.num_requests = 8;
  o.input_len = 64;
  o.output_len = 32;
  o.range_ratio = 0.3;
  o.prefix_len = 5;
  o.seed = 0;
  struct Expected {
    int prompt_len, output_len;
    std::uint64_t hash;
  };
  const std::vector<Expected> expected = {
      {83, 25, 0x35987f783e558446ULL}, {75, 39, 0xc3f2cabb9395ac48ULL}, {69, 35, 0x1e06f2900492d76aULL},
      {60, 41, 0x349d29fc76f2b622ULL}, {61, 32, 0x3912e02ea72d338dULL}, {50, 34, 0xbf32ad78713ea362ULL},
      {52, 42, 0x86f477bdeb8b6f5eULL}, {49, 37, 0xd423174261cbb73bULL},
  };
  const auto reqs = sample_random_requests(tok, o);
  ASSERT_EQ(reqs.size(), expected.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(reqs[i].prompt_len, expected[i].prompt_len);
    EXPECT_EQ(reqs[i].expected_output_len, expected[i].output_len);
    EXPECT_EQ(fnv1a64(reqs[i].prompt), expected[i].hash);
  }
}

TEST(BenchRandomDataset, BadOptionsAreRefused) {
  WordTokenizer tok;
  RandomDatasetOptions o;
  o.range_ratio = 1.0;
  EXPECT_THROW(sample_random_requests(tok, o), DatasetError);
  o.range_ratio = 0.0;
  o.input_len = 0;
  EXPECT_THROW(sample_random_requests(tok, o), DatasetError);
}

}  // namespace
}  // namespace fp4serve::tools::bench
