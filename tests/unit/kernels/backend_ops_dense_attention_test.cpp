// The backend op harness (backend_ops_harness.h) on the vision tower's dense attention: every backend
// against the CPU op at the tower's head dim (72: vision_config; 4 of its 16 heads), segments that are not
// multiples of any block size and one past a 256-key chunk of the CUDA kernels, both AttentionMath;
// and on every backend a segment computed alone gives the bits it gets next to others.
#include <gtest/gtest.h>

#include <span>

#include "backend_ops_harness.h"
#include "kernel_test_util.h"

namespace fp4serve::kernels::test::ops {
namespace {

struct DenseStep {
  DeviceTensor q, k, v;
  int64_t T = 0, H = 0, D = 0;
};

DenseStep dense_step(Backend& b, int64_t T, int64_t H, int64_t D, uint32_t seed) {
  DenseStep st;
  st.T = T, st.H = H, st.D = D;
  const std::size_t n = static_cast<std::size_t>(T * H * D);
  st.q = upload(b, DType::kBF16, {T, H, D}, to_bf16(random_f32(n, seed + 1, 2.0f)), "q");
  st.k = upload(b, DType::kBF16, {T, H, D}, to_bf16(random_f32(n, seed + 2)), "k");
  st.v = upload(b, DType::kBF16, {T, H, D}, to_bf16(random_f32(n, seed + 3)), "v");
  return st;
}

Output run_dense(Backend& b, DenseStep& st, std::span<const DenseSegment> segs, AttentionMath math) {
  DeviceTensor out = alloc(b, DType::kBF16, {st.T, st.H * st.D}, "out");
  b.dense_attention(segs, st.q.view, st.k.view, st.v.view, out.view, math);
  return download(b, out.view, "out");
}

const std::vector<DenseSegment> kSegments = {{0, 37}, {37, 270}};  // 307 rows: the second spans two chunks

TEST(BackendOps, DenseAttention) {
  Harness h;
  for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32})
    h.check({"dense_attention", cat("H=4 D=72 segments 37,270", math == AttentionMath::kHfEager ? " hf-eager" : " fp32"),
             OpClass::kMath, kNmseAttention, [=](Backend& b, uint32_t seed) {
               DenseStep st = dense_step(b, 307, 4, 72, seed);
               return std::vector<Output>{run_dense(b, st, kSegments, math)};
             }});
}

TEST(BackendOps, DenseAttentionBatchInvariance) {
  Harness h;
  for (Harness::Column& col : h.columns())
    for (AttentionMath math : {AttentionMath::kHfEager, AttentionMath::kFp32}) {
      Backend& b = *col.backend;
      DenseStep st = dense_step(b, 307, 4, 72, 41);
      const Output both = run_dense(b, st, kSegments, math);
      const std::size_t row = static_cast<std::size_t>(st.H * st.D) * 2;
      for (const DenseSegment& s : kSegments) {
        const Output alone = run_dense(b, st, {&s, 1}, math);
        same_bytes(both, static_cast<std::size_t>(s.row0) * row, alone, static_cast<std::size_t>(s.row0) * row,
                   static_cast<std::size_t>(s.rows) * row,
                   cat(col.spec.name, " dense_attention segment at row ", s.row0, " alone vs with the other",
                       math == AttentionMath::kHfEager ? " hf-eager" : " fp32"));
      }
    }
}

}  // namespace
}  // namespace fp4serve::kernels::test::ops
