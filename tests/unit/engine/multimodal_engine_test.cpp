// Images through the engine, with a deterministic fake VisionEncoder (features from the pixels):
// the image rows reach the model (outputs change with the image, equal the model run directly
// with the same rows and M-RoPE positions), outputs do not depend on the chunk size, the batch,
// preemption, n > 1 forks or resubmission as prompt + outputs, each image is encoded once per
// prefill, and the prefix cache hits the same image and misses another one with the same tokens.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>

#include "engine/image_features.h"
#include "engine/multimodal_prompt.h"
#include "engine_model_util.h"

namespace fp4serve::engine {
namespace {

using namespace fp4serve::engine::testing;

constexpr std::int32_t kImagePad = 501, kVisionStart = 503, kVisionEnd = 504;

// Row r of an image = a function of its 2x2 merge block's pixels (so another image gives other
// rows), scaled like the tiny model's embeddings.
class FakeEncoder : public model::VisionEncoder {
 public:
  explicit FakeEncoder(int hidden) : hidden_(hidden) {}
  std::vector<float> encode(const vision::PixelPatches& im) const override {
    ++calls;
    const std::int64_t rows = im.grid.num_llm_tokens(2);
    std::vector<float> out(static_cast<std::size_t>(rows * hidden_));
    for (std::int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (std::int64_t k = 0; k < 4 * im.patch_dim; ++k) s += im.values[static_cast<std::size_t>(r * 4 * im.patch_dim + k)];
      for (int j = 0; j < hidden_; ++j)
        out[static_cast<std::size_t>(r * hidden_ + j)] = static_cast<float>(0.05 * std::sin(s * 0.7 + j * 0.37 + r * 0.11));
    }
    return out;
  }
  void validate(const vision::PixelPatches& im) const override {
    if (im.patch_dim != 6) throw std::invalid_argument("the fake tower takes patches of 6 values");
  }
  int out_hidden() const override { return hidden_; }
  int spatial_merge_size() const override { return 2; }
  mutable std::atomic<int> calls{0};

 private:
  int hidden_;
};

// An image of h x w patches (h, w even) whose pixel values follow `seed`.
std::shared_ptr<const vision::PixelPatches> image(int seed, int h = 8, int w = 8) {
  auto p = std::make_shared<vision::PixelPatches>();
  p->grid = {1, h, w};
  p->patch_dim = 6;
  p->values.resize(static_cast<std::size_t>(h * w * p->patch_dim));
  for (std::size_t i = 0; i < p->values.size(); ++i) p->values[i] = static_cast<float>(std::sin(seed * 12.9898 + i * 0.618));
  return p;
}

struct MmCase {
  std::vector<std::int32_t> prompt;
  MultimodalInputs images;
};

// `before` text tokens, then each image wrapped in vision start/end with `between` text tokens after it.
MmCase make_case(const std::vector<std::shared_ptr<const vision::PixelPatches>>& images, int before = 10,
                 int between = 30, unsigned text_seed = 5) {
  std::mt19937 rng(text_seed);
  MmCase c;
  c.prompt = random_prompt(rng, before);
  for (std::size_t i = 0; i < images.size(); ++i) {
    c.prompt.push_back(kVisionStart);
    ImageInput in;
    in.pixels = images[i];
    in.offset = static_cast<int>(c.prompt.size());
    in.num_tokens = static_cast<int>(images[i]->grid.num_llm_tokens(2));
    // The test's "content hash": the pixels' first values (distinct images differ there).
    in.content_hash = {static_cast<std::uint64_t>(std::llround(images[i]->values[0] * 1e9)),
                       static_cast<std::uint64_t>(std::llround(images[i]->values[1] * 1e9))};
    c.images.push_back(in);
    c.prompt.insert(c.prompt.end(), static_cast<std::size_t>(in.num_tokens), kImagePad);
    c.prompt.push_back(kVisionEnd);
    const auto text = random_prompt(rng, between);
    c.prompt.insert(c.prompt.end(), text.begin(), text.end());
  }
  return c;
}

EngineRequest mm_request(const std::string& id, const MmCase& c, int max_tokens) {
  EngineRequest r = greedy_request(id, c.prompt, max_tokens);
  r.images = c.images;
  return r;
}

std::shared_ptr<FakeEncoder> encoder() { return std::make_shared<FakeEncoder>(256); }

EngineConfig mm_config(std::shared_ptr<FakeEncoder> enc) {
  EngineConfig c = small_engine_config();
  c.vision_encoder = std::move(enc);
  return c;
}

// Greedy tokens of the model run directly with the encoder's rows and the case's M-RoPE layout.
std::vector<std::int32_t> direct_greedy(const MmCase& c, const FakeEncoder& enc, int n) {
  const auto& m = *tiny_model();
  const auto mm = make_multimodal_prompt(c.images, c.prompt, ImageRules{kImagePad, 2});
  std::vector<std::vector<float>> feats;
  std::vector<model::EmbeddingRows> rows;
  for (const ImageInput& im : c.images) feats.push_back(enc.encode(*im.pixels));
  for (std::size_t i = 0; i < c.images.size(); ++i)
    rows.push_back({c.images[i].offset, c.images[i].num_tokens, feats[i].data()});
  auto st = m.new_sequence(static_cast<int64_t>(c.prompt.size()) + n);
  std::vector<float> logits = m.forward({{&st, c.prompt, false, rows, mm->mrope}});
  std::vector<std::int32_t> out;
  for (int i = 0; i < n; ++i) {
    const auto best = static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    const std::vector<std::int32_t> next{best};
    if (i + 1 < n) logits = m.forward({{&st, next, false, {}, mm->mrope}});
  }
  return out;
}

std::vector<float> prompt_scores(const Finished& f) {
  std::vector<float> s;
  if (!f.prompt_logprobs[0]) return s;
  for (const auto& e : *f.prompt_logprobs[0]) s.push_back(e ? e->sampled.logprob : 0.0f);
  return s;
}

TEST(MultimodalEngine, ImageRowsReachTheModelAsARunOfTheModelDoes) {
  auto enc = encoder();
  Engine engine(tiny_model(), qwen_tokenizer(), mm_config(enc));
  const MmCase a = make_case({image(1)}), b = make_case({image(2)});
  ASSERT_EQ(a.prompt, b.prompt);  // the same token ids, other pixels
  auto scored = [&](const std::string& id, const MmCase& c) {
    EngineRequest r = mm_request(id, c, 12);
    r.params.prompt_logprobs = 0;
    return collect(*engine.submit(std::move(r)));
  };
  const Finished fa = scored("a", a), fb = scored("b", b);
  ASSERT_FALSE(fa.error) << *fa.error;
  EXPECT_EQ(enc->calls.load(), 2);
  EXPECT_EQ(fa.tokens[0], direct_greedy(a, *enc, 12));
  EXPECT_EQ(fb.tokens[0], direct_greedy(b, *enc, 12));
  // Prompt logprobs: equal up to the image's first row, different from it on.
  const auto sa = prompt_scores(fa), sb = prompt_scores(fb);
  ASSERT_EQ(sa.size(), a.prompt.size());
  const auto first = static_cast<std::size_t>(a.images[0].offset);
  EXPECT_TRUE(std::equal(sa.begin(), sa.begin() + static_cast<std::ptrdiff_t>(first + 1), sb.begin()));
  EXPECT_NE(std::vector<float>(sa.begin() + static_cast<std::ptrdiff_t>(first + 1), sa.end()),
            std::vector<float>(sb.begin() + static_cast<std::ptrdiff_t>(first + 1), sb.end()));
  expect_no_leaks(engine);
}

TEST(MultimodalEngine, OutputIndependentOfChunkSizeAndBatch) {
  const MmCase c = make_case({image(3), image(4, 4, 6)}, 7, 12);
  auto enc = encoder();
  const auto want = direct_greedy(c, *enc, 10);
  for (int budget : {5, 16, 256}) {
    EngineConfig cfg = mm_config(enc);
    cfg.max_num_batched_tokens = budget;  // 5: every image split across chunks
    Engine engine(tiny_model(), qwen_tokenizer(), cfg);
    // With text requests around it, and a second copy of itself.
    std::mt19937 rng(budget);
    std::vector<std::shared_ptr<OutputChannel>> noise;
    for (int i = 0; i < 4; ++i) noise.push_back(engine.submit(greedy_request("t" + std::to_string(i), random_prompt(rng, 20 + 9 * i), 6)));
    const int before = enc->calls.load();
    auto ch = engine.submit(mm_request("mm", c, 10));
    const Finished f = collect(*ch);
    for (auto& n : noise) collect(*n);
    ASSERT_FALSE(f.error) << *f.error;
    EXPECT_EQ(f.tokens[0], want) << "budget " << budget;
    EXPECT_EQ(enc->calls.load() - before, 2) << "each image encoded once, whatever the chunks";
    expect_no_leaks(engine);
  }
}

TEST(MultimodalEngine, PrefixCacheHitsTheSameImageAndMissesAnother) {
  auto enc = encoder();
  Engine engine(tiny_model(), qwen_tokenizer(), mm_config(enc));
  const MmCase a = make_case({image(1)}, 10, 40), b = make_case({image(2)}, 10, 40);
  const Finished first = collect(*engine.submit(mm_request("first", a, 8)));
  ASSERT_EQ(first.num_cached_tokens, 0);
  const int after_first = enc->calls.load();
  // The same prompt and image: a hit up to the last block boundary before the prompt's end, which is
  // past the image, so nothing is encoded.
  const Finished again = collect(*engine.submit(mm_request("again", a, 8)));
  const int L = static_cast<int>(a.prompt.size());
  EXPECT_EQ(again.num_cached_tokens, (L - 1) / 16 * 16);
  EXPECT_EQ(again.tokens[0], first.tokens[0]);
  EXPECT_EQ(enc->calls.load(), after_first);
  // The same token ids with another image: no block holding image tokens may hit (the image starts in
  // block 0, so nothing hits), and the answer is the other image's.
  const Finished other = collect(*engine.submit(mm_request("other", b, 8)));
  EXPECT_EQ(other.num_cached_tokens, 0);
  EXPECT_EQ(enc->calls.load(), after_first + 1);
  EXPECT_EQ(other.tokens[0], direct_greedy(b, *enc, 8));
  expect_no_leaks(engine);
}

TEST(MultimodalEngine, TextBeforeTheImageStillHits) {
  // A long text prefix shared by two prompts with different images: the blocks before the image hit.
  auto enc = encoder();
  EngineConfig cfg = mm_config(enc);
  Engine engine(tiny_model(), qwen_tokenizer(), cfg);
  const MmCase a = make_case({image(1)}, 70, 10), b = make_case({image(2)}, 70, 10);
  collect(*engine.submit(mm_request("a", a, 4)));
  const Finished fb = collect(*engine.submit(mm_request("b", b, 4)));
  // The snapshot interval is 64: the prefix hit is the first 64 tokens (text only; the image starts at 71).
  EXPECT_EQ(fb.num_cached_tokens, 64);
  EXPECT_EQ(fb.tokens[0], direct_greedy(b, *enc, 4));
}

TEST(MultimodalEngine, ForksPreemptionAndResubmissionKeepTheTokens) {
  auto enc = encoder();
  const MmCase c = make_case({image(7), image(8, 6, 4)}, 9, 20);
  const auto want = direct_greedy(c, *enc, 16);
  {
    // n = 2, greedy: both children continue the one prefill with the same tokens.
    Engine engine(tiny_model(), qwen_tokenizer(), mm_config(enc));
    EngineRequest r = mm_request("n2", c, 16);
    r.params.n = 2;
    const Finished f = collect(*engine.submit(std::move(r)), 2);
    ASSERT_FALSE(f.error) << *f.error;
    EXPECT_EQ(f.tokens[0], want);
    EXPECT_EQ(f.tokens[1], want);
    expect_no_leaks(engine);
  }
  {
    // A pool too small for the batch: requests are preempted and recomputed (images encoded again).
    EngineConfig cfg = mm_config(enc);
    cfg.max_model_len = 128;  // 8 blocks; a request needs 6
    cfg.num_kv_blocks_override = 12;
    Engine engine(tiny_model(), qwen_tokenizer(), cfg);
    std::vector<std::shared_ptr<OutputChannel>> chans;
    for (int i = 0; i < 6; ++i) chans.push_back(engine.submit(mm_request("p" + std::to_string(i), c, 16)));
    for (auto& ch : chans) {
      const Finished f = collect(*ch);
      ASSERT_FALSE(f.error) << *f.error;
      EXPECT_EQ(f.tokens[0], want);
    }
    EXPECT_GT(engine.stats().scheduler.num_preemptions, 0) << "the pool was meant to be too small";
    expect_no_leaks(engine);
  }
  {
    // Resubmitted as prompt + the outputs delivered so far (an engine restart): the rest follows.
    EngineConfig cfg = mm_config(enc);
    cfg.enable_prefix_caching = false;
    Engine engine(tiny_model(), qwen_tokenizer(), cfg);
    MmCase resumed = c;
    resumed.prompt.insert(resumed.prompt.end(), want.begin(), want.begin() + 5);
    const Finished f = collect(*engine.submit(mm_request("resumed", resumed, 11)));
    EXPECT_EQ(f.tokens[0], std::vector<std::int32_t>(want.begin() + 5, want.end()));
  }
}

TEST(MultimodalEngine, BadImagesAreRefused) {
  const MmCase c = make_case({image(1)});
  {
    Engine engine(tiny_model(), qwen_tokenizer(), small_engine_config());  // no vision encoder
    try {
      engine.submit(mm_request("x", c, 4));
      FAIL() << "accepted an image without a vision encoder";
    } catch (const EngineRejected& e) {
      EXPECT_EQ(e.reason(), EngineRejected::Reason::kInvalid);
      EXPECT_NE(std::string(e.what()).find("no vision tower"), std::string::npos) << e.what();
    }
  }
  Engine engine(tiny_model(), qwen_tokenizer(), mm_config(encoder()));
  auto refused = [&](MmCase bad, const std::string& why) {
    try {
      engine.submit(mm_request("bad", bad, 4));
      ADD_FAILURE() << "accepted: " << why;
    } catch (const EngineRejected& e) {
      EXPECT_EQ(e.reason(), EngineRejected::Reason::kInvalid) << why;
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  MmCase short_run = c;
  short_run.images[0].num_tokens -= 1;
  refused(short_run, "<|image_pad|> tokens for a grid that makes 16 rows");
  MmCase moved = c;
  moved.images[0].offset -= 1;  // covers the vision-start token
  refused(moved, "not the image token");
  MmCase outside = c;
  outside.images[0].offset = static_cast<int>(c.prompt.size()) - 4;
  refused(outside, "outside the prompt");
  MmCase no_pixels = c;
  no_pixels.images[0].pixels = nullptr;
  refused(no_pixels, "has no pixels");
  MmCase odd_grid = c;
  auto odd = std::make_shared<vision::PixelPatches>(*image(1));
  odd->grid.w = 7;
  odd_grid.images[0].pixels = odd;
  refused(odd_grid, "merge blocks");
  MmCase wide_patches = c;  // the server's processor and the tower disagree on the patch size
  auto wide = std::make_shared<vision::PixelPatches>(*image(1));
  wide->patch_dim = 12;
  wide->values.resize(wide->values.size() * 2);
  wide_patches.images[0].pixels = wide;
  refused(wide_patches, "the fake tower takes patches of 6 values");
  expect_no_leaks(engine);
}

TEST(MultimodalPrompt, BlockKeysNameTheImagesInTheBlock) {
  const MmCase c = make_case({image(1, 2, 2), image(2, 2, 2)}, 3, 2);  // 1-token images at 4 and 9
  const auto mm = make_multimodal_prompt(c.images, c.prompt, ImageRules{kImagePad, 2});
  ASSERT_TRUE(mm);
  std::vector<std::uint64_t> keys;
  mm->append_block_keys(0, 4, keys);
  EXPECT_TRUE(keys.empty());
  mm->append_block_keys(0, 8, keys);
  EXPECT_EQ(keys, (std::vector<std::uint64_t>{c.images[0].content_hash[0], c.images[0].content_hash[1]}));
  keys.clear();
  mm->append_block_keys(4, 12, keys);
  EXPECT_EQ(keys.size(), 4u);
  // A 1x1 image takes one position: no delta.
  ASSERT_EQ(c.images[1].offset, 9);
  EXPECT_EQ(mm->mrope[1].start, 9);
  EXPECT_EQ(model::mrope_delta(mm->mrope), 0);
}

}  // namespace
}  // namespace fp4serve::engine
