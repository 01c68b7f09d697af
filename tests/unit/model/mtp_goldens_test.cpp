// The MTP head (mtp_forward.cpp) against the PyTorch reference that follows vLLM's qwen3_5_mtp.py
// (tools/reference/mtp_reference.py, goldens by make_tiny_mtp.py) on the tiny BF16 model: the
// trunk's final-norm hidden states of a prompt feed the MTP rows (row p: token p + 1, position p),
// then one chained draft row feeds back the last row's MTP hidden state and its argmax token at the
// next position, attending to the KV the rows before wrote.
//
// Tolerances: as the trunk's goldens (tiny_model_goldens_test.cpp), our fp32 accumulation order
// differs from torch's, so bf16 roundings differ by an ulp here and there; the MTP adds one decoder
// layer to the trunk's differences in the hidden state it reads. Bounds: 90th percentile over rows
// of the max |ours - reference| logit error, and the worst row; argmax equal wherever the
// reference's top-1 margin is clear.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "checkpoint/checkpoint_error.h"
#include "goldens.h"
#include "model/qwen3_5_moe.h"

namespace fp4serve {
namespace {

const std::filesystem::path kTiny = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-bf16";

struct RowErrors {
  std::vector<float> max_abs;  // per row
  int argmax_mismatch_clear = 0;
};

RowErrors compare(const float* ours, const std::vector<float>& ref, int64_t rows, int64_t V) {
  RowErrors e;
  for (int64_t r = 0; r < rows; ++r) {
    const float* a = ours + r * V;
    const float* b = ref.data() + r * V;
    float m = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, std::fabs(a[i] - b[i]));
    e.max_abs.push_back(m);
    std::vector<float> sorted(b, b + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const auto ia = std::max_element(a, a + V) - a, ib = std::max_element(b, b + V) - b;
    if (ia != ib && sorted[0] - sorted[1] > 0.25f) ++e.argmax_mismatch_clear;
  }
  return e;
}

float percentile(std::vector<float> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

TEST(MtpGoldens, LogitsAndAChainedDraftMatchTheReference) {
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(kTiny.string()));
  ASSERT_TRUE(ck->has_mtp()) << ck->mtp_unavailable_reason();
  model::Qwen35MoeModel m(ck);
  m.bind_mtp();
  const auto g = testing::Goldens::load(kTiny, "mtp_goldens");
  const ModelConfig& c = m.config();
  const int64_t H = c.hidden_size, V = c.vocab_size;
  kernels::Backend& be = m.backend();
  for (const auto& [key, entry] : g.meta.at("prompts").items()) {
    const auto prompt = entry.at("prompt").get<std::vector<int32_t>>();
    const auto T = static_cast<int64_t>(prompt.size()), R = T - 1;
    // The trunk: its final-norm hidden state at every position (output_hidden_states' last entry).
    auto st = m.new_sequence(T);
    std::vector<std::vector<uint16_t>> hs;
    m.forward({{&st, prompt, true}}, &hs);
    // Buffers: hidden in [T, H], concat scratch [T, 2H], hidden out [T, H]; the MTP layer's KV.
    kernels::DeviceBuffer buf = be.allocate(static_cast<size_t>(4 * T * H * 2), "test");
    const auto hidden = buf.view(DType::kBF16, {T, H}, 0);
    const auto cat = buf.view(DType::kBF16, {T, 2 * H}, static_cast<size_t>(T * H * 2));
    const auto hout = buf.view(DType::kBF16, {T, H}, static_cast<size_t>(3 * T * H * 2));
    be.upload(hidden.rows(0, R), hs.back().data());
    std::vector<uint16_t> k(static_cast<size_t>(T * c.kv_dim())), v(k.size());
    kernels::KvView kv;
    kv.k = k.data();
    kv.v = v.data();
    kv.capacity = T;
    kv.n_kv_heads = static_cast<int>(c.num_key_value_heads);
    kv.head_dim = static_cast<int>(c.head_dim);
    kernels::StepLimits lim;
    lim.max_tokens = T;
    lim.max_seqs = 1;
    lim.max_logit_rows = T;
    lim.max_context = T;
    model::StepWorkspace ws(be, c, lim);

    model::BatchSequence b;
    b.tokens = std::span<const int32_t>(prompt).subspan(1);
    b.pos0 = 0;
    b.kv = std::span<const kernels::KvView>(&kv, 1);
    b.logits = model::BatchSequence::Logits::kAll;
    const kernels::TensorView logits = m.forward_mtp({&b, 1}, hidden.rows(0, R), ws, cat, hout);
    ASSERT_EQ(logits.dim(0), R);
    const RowErrors e = compare(logits.as<const float>(), g.tensor("prompt" + key + "/bf16/mtp_logits"), R, V);
    const float p90 = percentile(e.max_abs, 0.9), worst = *std::max_element(e.max_abs.begin(), e.max_abs.end());
    std::printf("prompt %s: MTP logits max |d| p90 %.4f worst %.4f over %lld rows\n", key.c_str(), p90, worst,
                static_cast<long long>(R));
    EXPECT_LT(p90, 0.0625f) << "prompt " << key;
    EXPECT_LT(worst, 0.25f) << "prompt " << key;
    EXPECT_EQ(e.argmax_mismatch_clear, 0) << "prompt " << key;

    // Chained: the last row's MTP hidden state and argmax, one position on.
    const float* last = logits.as<const float>() + (R - 1) * V;
    const int32_t draft = static_cast<int32_t>(std::max_element(last, last + V) - last);
    EXPECT_EQ(draft, entry.at("chain_token").get<int32_t>()) << "prompt " << key;
    be.copy(hidden.rows(0, 1), hout.rows(R - 1, 1));
    model::BatchSequence chained;
    chained.tokens = std::span<const int32_t>(&draft, 1);
    chained.pos0 = R;
    chained.kv = std::span<const kernels::KvView>(&kv, 1);
    chained.logits = model::BatchSequence::Logits::kLast;
    const kernels::TensorView chain = m.forward_mtp({&chained, 1}, hidden.rows(0, 1), ws, cat, hout);
    const RowErrors ce = compare(chain.as<const float>(), g.tensor("prompt" + key + "/bf16/mtp_chain_logits"), 1, V);
    std::printf("prompt %s: chained draft logits max |d| %.4f\n", key.c_str(), ce.max_abs[0]);
    EXPECT_LT(ce.max_abs[0], 0.25f) << "prompt " << key;
    EXPECT_EQ(ce.argmax_mismatch_clear, 0) << "prompt " << key;
  }
}

TEST(MtpGoldens, ACheckpointWithoutMtpRefusesToBindIt) {
  const auto dir = std::filesystem::path(FP4SERVE_TEST_DATA_DIR) / "models" / "tiny-fp8";
  auto ck = std::make_shared<LoadedCheckpoint>(LoadedCheckpoint::open(dir.string()));
  EXPECT_FALSE(ck->has_mtp());
  model::Qwen35MoeModel m(ck);
  try {
    m.bind_mtp();
    FAIL() << "expected a refusal";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("no MTP layer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(m.has_mtp());
}

}  // namespace
}  // namespace fp4serve
