// BatchSequence::Logits::kLastN (speculative verification asks for the last 1 + d rows of a
// sequence): each row is bit-identical to the same position's row under kAll, rows come in sequence
// order next to other sequences' kLast rows, and N larger than the new tokens is clamped.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "model/qwen3_5_moe.h"

namespace fp4serve {
namespace {

std::shared_ptr<model::Qwen35MoeModel> tiny() {
  const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
  return std::make_shared<model::Qwen35MoeModel>(ck);
}

// A BatchSequence over a contiguous SequenceState (what Qwen35MoeModel::forward builds); the views
// live in `held` while the step runs.
struct Held {
  std::vector<std::vector<model::GdnStateRef>> gdn;
  std::vector<std::vector<kernels::KvView>> kv;
};
model::BatchSequence over(const model::Qwen35MoeModel& m, model::SequenceState& st, std::span<const int32_t> tokens,
                          model::BatchSequence::Logits logits, Held& held, int64_t last_rows = 0) {
  held.gdn.emplace_back();
  held.kv.emplace_back();
  for (size_t l = 0; l < st.conv.size(); ++l) held.gdn.back().push_back({st.conv[l].data(), st.ssm[l].data()});
  for (size_t l = 0; l < st.k.size(); ++l) {
    kernels::KvView kv;
    kv.dtype = st.kv_dtype;
    kv.k = st.k[l].data();
    kv.v = st.v[l].data();
    kv.capacity = st.capacity;
    kv.n_kv_heads = static_cast<int>(m.config().num_key_value_heads);
    kv.head_dim = static_cast<int>(m.config().head_dim);
    held.kv.back().push_back(kv);
  }
  model::BatchSequence b;
  b.tokens = tokens;
  b.pos0 = st.length;
  b.logits = logits;
  b.last_rows = last_rows;
  b.gdn = held.gdn.back();
  b.kv = held.kv.back();
  return b;
}

TEST(LogitsLastRows, AreTheTailOfAllRowsBitForBit) {
  const auto m = tiny();
  const int64_t V = m->vocab_size();
  const std::vector<int32_t> prompt{5, 17, 42, 9, 300, 11, 2, 77, 8};
  const std::vector<int32_t> other{3, 4, 5};
  using L = model::BatchSequence::Logits;

  auto all_state = m->new_sequence(64);
  Held held_all;
  const std::vector<float> all = m->forward_batch({over(*m, all_state, prompt, L::kAll, held_all)});
  ASSERT_EQ(all.size(), prompt.size() * static_cast<size_t>(V));

  for (int64_t n : {1, 4, 9, 20}) {
    auto st = m->new_sequence(64);
    auto st_other = m->new_sequence(64);
    Held held;
    held.gdn.reserve(2);
    held.kv.reserve(2);
    const std::vector<float> got = m->forward_batch(
        {over(*m, st, prompt, L::kLastN, held, n), over(*m, st_other, other, L::kLast, held)});
    const int64_t rows = std::min<int64_t>(n, static_cast<int64_t>(prompt.size()));
    ASSERT_EQ(got.size(), static_cast<size_t>((rows + 1) * V)) << n;
    const std::vector<float> tail(all.end() - rows * V, all.end());
    EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + rows * V), tail) << "last " << n << " rows";
    auto alone = m->new_sequence(64);
    EXPECT_EQ(std::vector<float>(got.begin() + rows * V, got.end()), m->forward({{&alone, other, false}}))
        << "the next sequence's row follows";
  }
}

}  // namespace
}  // namespace fp4serve
