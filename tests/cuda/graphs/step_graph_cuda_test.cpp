// CUDA step graphs on a device (Backend::capture_step / replay_step, src/kernels/cuda/step_graph.h):
// the tiny models' pure-decode steps replayed from a graph give the eager step's logits bit for bit,
// with context lengths, state slots and block tables different from the capture's; a replay whose
// forward differs from the capture's throws GraphMismatch and leaves the backend usable. Label gpu.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <vector>

#include "checkpoint/weight_loader.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/graph_recorder.h"
#include "model/paged_kv_cache.h"
#include "model/qwen3_5_moe.h"
#include "model/state_arena.h"
#include "model/step_workspace.h"

namespace fp4serve {
namespace {

using kernels::TensorView;
using model::BatchSequence;

constexpr int kBlockSize = 16;
constexpr int kTableBlocks = 24;  // 384 keys per sequence: decodes past 256 keys take the split path eagerly
constexpr int64_t kMaxContext = kTableBlocks * kBlockSize;
constexpr int kMaxSeqs = 8;

// One sequence's place in the caches: its GDN state entry and block table, and the refs a
// BatchSequence points to (kept alive here).
struct Seq {
  int entry = 0;
  std::vector<int32_t> table;
  std::vector<model::GdnStateRef> gdn;
  std::vector<kernels::KvView> kv;
  int64_t length = 0;
  std::vector<int32_t> next;  // the token(s) of the next step
};

class StepGraphTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    backend_ = kernels::cuda::make_cuda_backend_if_present();
    if (!backend_) {
      if (std::getenv("FP4SERVE_REQUIRE_CUDA") != nullptr) FAIL() << "no CUDA device (FP4SERVE_REQUIRE_CUDA is set)";
      GTEST_SKIP() << "no CUDA device";
    }
    const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / GetParam();
    auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
    model_ = std::make_unique<model::Qwen35MoeModel>(ck, *backend_);
    backend_->weights_summary();
    const ModelConfig& c = model_->config();
    kernels::StepLimits limits;
    limits.max_tokens = 64;
    limits.max_seqs = 2 * kMaxSeqs + 1;
    limits.max_logit_rows = 2 * kMaxSeqs + 1;
    limits.max_context = kMaxContext;
    backend_->reserve(limits, model_->shape());
    attn_layers_ = static_cast<int>(c.num_full_attention_layers());
    gdn_layers_ = static_cast<int>(c.num_linear_attention_layers());
    // Two sets of kMaxSeqs sequences (eager and replayed) and one dummy for padding.
    const int seqs = 2 * kMaxSeqs + 1;
    kv_ = model::PagedKvCache(*backend_, attn_layers_, seqs * kTableBlocks + 1, kBlockSize,
                              static_cast<int>(c.num_key_value_heads), static_cast<int>(c.head_dim),
                              kernels::KvDtype::kBf16);
    gdn_ = model::GdnStateArena(*backend_, seqs, gdn_layers_, model_->gdn_dims());
  }

  // Sequence `i` of the pool: entry i, blocks laid out in reverse so the tables are not the identity.
  Seq make_seq(int i) {
    Seq s;
    s.entry = i;
    for (int b = 0; b < kTableBlocks; ++b) s.table.push_back(kv_.num_blocks() - 1 - (i * kTableBlocks + b));
    s.gdn.resize(static_cast<size_t>(gdn_layers_));
    gdn_.refs(i, s.gdn);
    for (int l = 0; l < attn_layers_; ++l) s.kv.push_back(kv_.view(l, s.table, 1.0f, 1.0f));
    gdn_.zero(i);
    return s;
  }

  BatchSequence batch(const Seq& s) const {
    BatchSequence b;
    b.tokens = s.next;
    b.pos0 = s.length;
    b.gdn = s.gdn;
    b.kv = s.kv;
    b.logits = BatchSequence::Logits::kLast;
    return b;
  }

  std::vector<float> download(const TensorView& logits) {
    std::vector<float> out(static_cast<size_t>(logits.numel()));
    backend_->download(out.data(), logits);
    return out;
  }

  // Eager step over `seqs` in a workspace of its own size; returns the logits.
  std::vector<float> eager_step(std::vector<Seq*> seqs) {
    std::vector<BatchSequence> step;
    for (Seq* s : seqs) step.push_back(batch(*s));
    model::StepWorkspace ws(*backend_, model_->config(), model_->limits_for(step));
    std::vector<float> out = download(model_->forward_step(step, ws));
    for (Seq* s : seqs) s->length += static_cast<int64_t>(s->next.size());
    return out;
  }

  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<model::Qwen35MoeModel> model_;
  model::PagedKvCache kv_;
  model::GdnStateArena gdn_;
  int attn_layers_ = 0, gdn_layers_ = 0;
};

TEST_P(StepGraphTest, ReplayEqualsEagerBitForBit) {
  for (const auto [B, padded] : {std::pair{1, 1}, std::pair{3, 4}, std::pair{8, 8}}) {
    SCOPED_TRACE(testing::Message() << "B " << B << " padded to " << padded);
    std::vector<Seq> a, b;
    for (int i = 0; i < B; ++i) a.push_back(make_seq(i));
    for (int i = 0; i < B; ++i) b.push_back(make_seq(kMaxSeqs + i));
    Seq dummy = make_seq(2 * kMaxSeqs);
    std::mt19937 rng(1234u + static_cast<unsigned>(B));
    const int64_t V = model_->vocab_size();
    // Prompts of different lengths (within one 16-key block, across blocks, and past the 256-key
    // chunk, where the eager decode takes attention's split path and the graph the fused one), each
    // set prefilled in one eager step of the same composition: the two sets hold the same bits.
    for (int i = 0; i < B; ++i) {
      const int len = i == 0 ? 300 : 3 + (i * 41) % 280;
      std::vector<int32_t> prompt(static_cast<size_t>(len));
      for (int32_t& id : prompt) id = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
      a[static_cast<size_t>(i)].next = prompt;
      b[static_cast<size_t>(i)].next = prompt;
    }
    std::vector<Seq*> pa, pb;
    for (Seq& s : a) pa.push_back(&s);
    for (Seq& s : b) pb.push_back(&s);
    const std::vector<float> la = eager_step(pa), lb = eager_step(pb);
    ASSERT_EQ(la, lb) << "the two prefills differ: the comparison below would mean nothing";

    // The graph: captured on the dummy sequence at position 0 in every row (nothing runs).
    std::vector<BatchSequence> step(static_cast<size_t>(padded));
    kernels::StepLimits limits{padded, padded, padded, kMaxContext};
    model::StepWorkspace ws(*backend_, model_->config(), limits);
    TensorView logits;
    auto forward = [&] { logits = model_->forward_step(step, ws); };
    dummy.next = {0};
    for (BatchSequence& s : step) s = batch(dummy);
    std::unique_ptr<kernels::StepGraph> graph = backend_->capture_step(forward);
    ASSERT_NE(graph, nullptr);
    EXPECT_GT(graph->num_nodes(), 0u);

    for (int n = 0; n < 3; ++n) {
      for (int i = 0; i < B; ++i) {
        const auto id = static_cast<int32_t>(rng() % static_cast<uint32_t>(V));
        a[static_cast<size_t>(i)].next = {id};
        b[static_cast<size_t>(i)].next = {id};
      }
      const std::vector<float> want = eager_step(pa);
      for (int i = 0; i < padded; ++i) step[static_cast<size_t>(i)] = batch(i < B ? b[static_cast<size_t>(i)] : dummy);
      backend_->replay_step(*graph, forward);
      const std::vector<float> got = download(logits);
      for (Seq& s : b) s.length += 1;
      ASSERT_EQ(got.size(), static_cast<size_t>(padded * V));
      EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + B * V), want) << "decode step " << n;
    }
  }
}

TEST_P(StepGraphTest, ReplayOfADifferentStepThrowsAndTheBackendStaysUsable) {
  Seq s0 = make_seq(0), s1 = make_seq(1), dummy = make_seq(2 * kMaxSeqs);
  s0.next = {1, 2, 3};
  s1.next = {4, 5};
  eager_step({&s0, &s1});
  kernels::StepLimits limits{2, 2, 2, kMaxContext};
  model::StepWorkspace ws(*backend_, model_->config(), limits);
  std::vector<BatchSequence> step(2);
  TensorView logits;
  auto forward = [&] { logits = model_->forward_step(step, ws); };
  dummy.next = {0};
  step = {batch(dummy), batch(dummy)};
  auto graph = backend_->capture_step(forward);
  ASSERT_NE(graph, nullptr);

  // Two tokens of one sequence instead of one of each: other uploads, another attention grid.
  s0.next = {7, 8};
  step = {batch(s0)};
  EXPECT_THROW(backend_->replay_step(*graph, forward), kernels::cuda::GraphMismatch);

  // The backend is back in eager mode: an eager step and a good replay both work.
  s0.next = {7};
  s1.next = {9};
  step = {batch(s0), batch(s1)};
  EXPECT_NO_THROW(backend_->replay_step(*graph, forward));
  EXPECT_NO_THROW(download(logits));
}

INSTANTIATE_TEST_SUITE_P(TinyModels, StepGraphTest, ::testing::Values("tiny-bf16", "tiny-nvfp4"));

}  // namespace
}  // namespace fp4serve
