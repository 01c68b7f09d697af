// The host half of the CUDA backend's GDN state copy/zero (src/kernels/cuda/elementwise_state.h):
// the byte ranges one launch moves.
#if defined(FP4SERVE_HAVE_CUDA)
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "kernels/cuda/elementwise_state.h"

namespace fp4serve::kernels::cuda {
namespace {

GdnDims small_dims() {
  GdnDims d;
  d.Hk = 2, d.Hv = 4, d.dk = 16, d.dv = 24, d.conv_kernel = 4;
  return d;
}

TEST(CudaStateJobs, OneRangePerLayerAndStateKind) {
  const GdnDims d = small_dims();  // conv (4-1) * (2*32 + 96) bf16 = 960 bytes; ssm 4*16*24 f32 = 6144 bytes
  std::vector<uint16_t> conv(4 * 480);
  std::vector<float> ssm(4 * 1536);
  const std::vector<GdnStateRef> src = {{&conv[0], &ssm[0]}, {&conv[480], &ssm[1536]}};
  const std::vector<GdnStateRef> dst = {{&conv[960], &ssm[3072]}, {&conv[1440], &ssm[4608]}};
  const auto jobs = state_copy_jobs(dst, src, d);
  ASSERT_EQ(jobs.size(), 4u);
  EXPECT_EQ(jobs[0].dst, &conv[960]);
  EXPECT_EQ(jobs[0].src, &conv[0]);
  EXPECT_EQ(jobs[0].bytes, 960u);
  EXPECT_EQ(jobs[1].dst, &ssm[3072]);
  EXPECT_EQ(jobs[1].src, &ssm[0]);
  EXPECT_EQ(jobs[1].bytes, 6144u);
  EXPECT_EQ(jobs[3].src, &ssm[1536]);

  const auto zero = state_zero_jobs(dst, d);
  ASSERT_EQ(zero.size(), 4u);
  for (const StateCopyJob& j : zero) EXPECT_EQ(j.src, nullptr);
  EXPECT_EQ(zero[2].dst, &conv[1440]);
  EXPECT_EQ(zero[2].bytes, 960u);
}

TEST(CudaStateJobs, SelfCopiesAreDroppedAndBadArgumentsThrow) {
  const GdnDims d = small_dims();
  std::vector<uint16_t> conv(480);
  std::vector<float> ssm(1536);
  const std::vector<GdnStateRef> e = {{conv.data(), ssm.data()}};
  EXPECT_TRUE(state_copy_jobs(e, e, d).empty());
  const std::vector<GdnStateRef> two(2), null_conv = {{nullptr, ssm.data()}};
  EXPECT_THROW(state_copy_jobs(two, e, d), std::invalid_argument);
  EXPECT_THROW(state_copy_jobs(null_conv, e, d), std::invalid_argument);
  EXPECT_THROW(state_copy_jobs(e, null_conv, d), std::invalid_argument);
  EXPECT_THROW(state_zero_jobs(null_conv, d), std::invalid_argument);
  EXPECT_TRUE(state_zero_jobs({}, d).empty());
}

}  // namespace
}  // namespace fp4serve::kernels::cuda
#endif
