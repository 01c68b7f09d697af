// The MoE block's own kernels on the GPU (moe_kernels.h: route, sort, gather, SwiGLU, combine),
// without the linears, against the CPU: routing and grouping against moe_cpu.cpp's moe_route and
// group_by_expert, the element kernels against moe_math.h's host functions (themselves tested
// against the CPU block in tests/unit/kernels/cuda_moe_*), all bit for bit. When the whole block
// (backend_ops_cuda_tests, BackendOps.Moe) fails on a GPU, this says whether the fault is here or
// in the grouped linear. Needs a GPU (label "gpu").
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu/moe_cpu.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/moe_math.h"
#include "kernels/cuda/moe_route.h"
#include "kernels/cuda/moe_sort.h"

namespace fp4serve::kernels::cuda {
namespace {

void ok(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

// Device memory for one test, freed at the end.
class Dev {
 public:
  ~Dev() {
    for (void* p : owned_) cudaFree(p);
  }
  template <class T>
  T* alloc(size_t n) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)), cudaSuccess);
    cudaMemset(p, 0xA5, std::max<size_t>(n, 1) * sizeof(T));  // poisoned
    owned_.push_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  T* up(const std::vector<T>& host) {
    T* d = alloc<T>(host.size());
    EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  template <class T>
  static std::vector<T> down(const T* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  std::vector<void*> owned_;
};

bool have_device() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

std::vector<float> logits_for(int64_t T, int E, uint32_t seed, bool ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> wide(0.0f, 2.0f);
  std::uniform_int_distribution<int> small(-2, 2);
  std::vector<float> l(static_cast<size_t>(T * E));
  for (float& x : l) x = ties ? static_cast<float>(small(rng)) * 0.25f : wide(rng);
  return l;
}

TEST(CudaMoeKernels, RouteAndSortMatchTheCpuBitForBit) {
  ASSERT_TRUE(have_device()) << "no CUDA device";
  struct Case {
    int64_t T;
    int E, k;
    bool ties;
  };
  for (const Case c : {Case{1, 256, 8, false}, Case{8, 256, 8, false}, Case{64, 256, 8, false}, Case{64, 256, 8, true},
                       Case{300, 256, 8, false}, Case{37, 40, 3, true}, Case{5, 1024, 8, false}, Case{3, 8, 8, false},
                       Case{32, 256, 8, false}, Case{33, 256, 8, true}, Case{30, 1024, 8, false}}) {
    SCOPED_TRACE(testing::Message() << "T=" << c.T << " E=" << c.E << " k=" << c.k << (c.ties ? " ties" : ""));
    const std::vector<float> logits = logits_for(c.T, c.E, static_cast<uint32_t>(c.T * 7 + c.E), c.ties);
    std::vector<float> rounded = logits;
    for (float& x : rounded) x = round_bf16(x);
    const size_t R = static_cast<size_t>(c.T * c.k);
    std::vector<int32_t> want_idx(R);
    std::vector<float> want_w(R);
    moe_route(rounded.data(), c.T, c.E, c.k, want_idx.data(), want_w.data());
    const ExpertGroups want = group_by_expert(want_idx.data(), c.T, c.k, c.E);

    Dev d;
    const float* d_logits = d.up(logits);
    int32_t* d_idx = d.alloc<int32_t>(R);
    float* d_w = d.alloc<float>(R);
    int32_t* d_hist = d.alloc<int32_t>((R + moe::kSortChunk - 1) / moe::kSortChunk * c.E);
    int32_t* d_off = d.alloc<int32_t>(static_cast<size_t>(c.E) + 1);
    int32_t* d_row_token = d.alloc<int32_t>(R);
    int32_t* d_row_of = d.alloc<int32_t>(R);
    // The four-launch path at every size, then moe_cuda.cu's launcher (one block for <= 256 pairs).
    for (const bool combined : {false, true}) {
      SCOPED_TRACE(combined ? (moe_route_sort_fused(static_cast<int64_t>(R)) ? "one launch" : "combined launcher")
                            : "separate launches");
      ok(cudaMemset(d_idx, 0xA5, R * 4), "poison");
      ok(cudaMemset(d_w, 0xA5, R * 4), "poison");
      ok(cudaMemset(d_off, 0xA5, (static_cast<size_t>(c.E) + 1) * 4), "poison");
      ok(cudaMemset(d_row_token, 0xA5, R * 4), "poison");
      ok(cudaMemset(d_row_of, 0xA5, R * 4), "poison");
      if (combined) {
        launch_moe_route_sort(nullptr, d_logits, c.T, c.E, c.k, d_idx, d_w, d_hist, d_off, d_row_token, d_row_of);
      } else {
        launch_moe_route(nullptr, d_logits, c.T, c.E, c.k, d_idx, d_w);
        launch_moe_sort(nullptr, d_idx, static_cast<int64_t>(R), c.E, c.k, d_hist, d_off, d_row_token, d_row_of);
      }
      ok(cudaGetLastError(), "launch");
      EXPECT_EQ(Dev::down(d_idx, R), want_idx);
      const std::vector<float> got_w = Dev::down(d_w, R);
      EXPECT_EQ(std::memcmp(got_w.data(), want_w.data(), R * 4), 0) << "weights differ";
      EXPECT_EQ(Dev::down(d_off, static_cast<size_t>(c.E) + 1), want.offsets);
      EXPECT_EQ(Dev::down(d_row_token, R), want.token);
      const std::vector<int32_t> row_of = Dev::down(d_row_of, R);
      for (size_t r = 0; r < R; ++r)
        EXPECT_EQ(row_of[static_cast<size_t>(want.token[r]) * c.k + want.slot[r]], static_cast<int32_t>(r));
    }
  }
}

TEST(CudaMoeKernels, GatherSwigluAndCombineMatchTheHostSteps) {
  ASSERT_TRUE(have_device()) << "no CUDA device";
  const int64_t T = 19, H = 2048 + 8, I = 512;  // H: the vector path; I: every bf16 g below
  const int E = 256, k = 8;
  const int64_t R = T * k;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<int32_t> idx(static_cast<size_t>(R));
  std::vector<float> w(idx.size());
  {
    std::vector<float> logits = logits_for(T, E, 17, false);
    for (float& x : logits) x = round_bf16(x);
    moe_route(logits.data(), T, E, k, idx.data(), w.data());
  }
  const ExpertGroups g = group_by_expert(idx.data(), T, k, E);
  std::vector<int32_t> row_of(idx.size());
  for (size_t r = 0; r < g.token.size(); ++r) row_of[static_cast<size_t>(g.token[r]) * k + g.slot[r]] = static_cast<int32_t>(r);
  std::vector<uint16_t> x(static_cast<size_t>(T * H));
  for (auto& v : x) v = f32_to_bf16_bits(nd(rng));
  std::vector<float> gate(static_cast<size_t>(R * I)), up(gate.size()), down(static_cast<size_t>(R * H));
  for (size_t i = 0; i < gate.size(); ++i) {  // every finite bf16 value, then off the bf16 grid
    const float v = bf16_bits_to_f32(static_cast<uint16_t>(i & 0xFFFF)) * (i & 0x10000 ? 1.0f : 1.0001f);
    gate[i] = std::isfinite(v) ? v : 0.0f;
  }
  for (auto& v : up) v = nd(rng) * 4.0f;
  for (auto& v : down) v = nd(rng);
  std::vector<float> s_score(static_cast<size_t>(T)), s_down(static_cast<size_t>(T * H));
  for (auto& v : s_score) v = nd(rng) * 3.0f;
  for (auto& v : s_down) v = nd(rng);

  Dev d;
  uint16_t* d_xs = d.alloc<uint16_t>(static_cast<size_t>(R * H));
  uint16_t* d_act = d.alloc<uint16_t>(static_cast<size_t>(R * I));
  uint16_t* d_out = d.alloc<uint16_t>(static_cast<size_t>(T * H));
  uint16_t* d_out_ns = d.alloc<uint16_t>(static_cast<size_t>(T * H));
  launch_moe_gather(nullptr, d.up(x), H, d.up(g.token), R, d_xs);
  // Two jobs in one launch: the first half of the rows, then the second.
  const int64_t half = (R / 2) * I;
  const float* d_gate = d.up(gate);
  const float* d_up = d.up(up);
  launch_moe_swiglu(nullptr, {d_gate, d_up, half, d_act}, {d_gate + half, d_up + half, R * I - half, d_act + half});
  const float* d_down = d.up(down);
  const int32_t* d_idx = d.up(idx);
  const float* d_w = d.up(w);
  const int32_t* d_row_of = d.up(row_of);
  launch_moe_combine(nullptr, d_down, d_idx, d_w, d_row_of, T, k, H, d.up(s_score), d.up(s_down), d_out);
  launch_moe_combine(nullptr, d_down, d_idx, d_w, d_row_of, T, k, H, nullptr, nullptr, d_out_ns);
  ok(cudaGetLastError(), "launches");

  const std::vector<uint16_t> xs = Dev::down(d_xs, static_cast<size_t>(R * H));
  for (int64_t r = 0; r < R; ++r)
    ASSERT_EQ(std::memcmp(xs.data() + r * H, x.data() + g.token[static_cast<size_t>(r)] * H, H * 2), 0) << "row " << r;
  {  // an odd width: the element-wise path
    const int64_t W = 37;
    const std::vector<uint16_t> xo(x.begin(), x.begin() + T * W);
    uint16_t* d_xo = d.alloc<uint16_t>(static_cast<size_t>(R * W));
    launch_moe_gather(nullptr, d.up(xo), W, d.up(g.token), R, d_xo);
    const std::vector<uint16_t> xso = Dev::down(d_xo, static_cast<size_t>(R * W));
    for (int64_t r = 0; r < R; ++r)
      ASSERT_EQ(std::memcmp(xso.data() + r * W, xo.data() + g.token[static_cast<size_t>(r)] * W, W * 2), 0) << "row " << r;
  }
  const std::vector<uint16_t> act = Dev::down(d_act, static_cast<size_t>(R * I));
  for (size_t i = 0; i < act.size(); ++i) ASSERT_EQ(act[i], moe::bf16_bits(moe::swiglu(gate[i], up[i]))) << i;
  const std::vector<uint16_t> out = Dev::down(d_out, static_cast<size_t>(T * H)),
                              out_ns = Dev::down(d_out_ns, static_cast<size_t>(T * H));
  int32_t order[k];
  for (int64_t t = 0; t < T; ++t) {
    moe::combine_order(idx.data() + t * k, k, order);
    const float sg = moe::shared_gate(s_score[static_cast<size_t>(t)]);
    for (int64_t h = 0; h < H; ++h) {
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) {
        const size_t pair = static_cast<size_t>(t * k + order[j]);
        acc = moe::add_routed(acc, down[static_cast<size_t>(row_of[pair]) * H + h], w[pair]);
      }
      ASSERT_EQ(out_ns[static_cast<size_t>(t * H + h)], moe::bf16_bits(acc)) << "t=" << t << " h=" << h;
      acc = moe::add_shared(acc, sg, s_down[static_cast<size_t>(t * H + h)]);
      ASSERT_EQ(out[static_cast<size_t>(t * H + h)], moe::bf16_bits(acc)) << "t=" << t << " h=" << h << " (shared)";
    }
  }
}

}  // namespace
}  // namespace fp4serve::kernels::cuda
