// The sparse MoE block on CUDA: the host half. prepare_moe turns the block's weights into linear
// handles (linear_cuda.h) and one grouped linear per projection; moe() enqueues, on ctx.stream and
// without a host synchronization or read-back:
//   router and shared gate/up/score linears on x (f32) -> route (bf16 logits, softmax, top-k,
//   renormalize, bf16 weights)
//   -> counting sort of the (token, slot) pairs by expert -> gather x rows into the grouped order
//   -> grouped gate and up -> SwiGLU (routed and shared, one launch) -> grouped down
//   -> the shared expert's down linear
//   -> combine per token (ascending expert id, bf16 adds; + gated shared expert) -> out
// Every grid follows from T and top_k; the numbers are moe_cpu.cpp's (moe_math.h, moe_route.h).
#include "kernels/cuda/moe_cuda.h"

#include <array>
#include <span>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_error.h"
#include "kernels/cuda/linear_cuda.h"
#include "kernels/cuda/moe_kernels.h"
#include "kernels/cuda/moe_plan.h"

namespace fp4serve::kernels::cuda {
namespace {

struct MoeCuda {
  MoeDims dims;  // tokens = 0
  bool has_shared = false;
  LinearHandle router;
  GroupedLinear gate, up, down;
  LinearHandle s_gate, s_up, s_down, s_score;
};

TensorView device_view(void* p, DType dtype, int64_t rows, int64_t cols) {
  return TensorView::contiguous(p, dtype, {rows, cols}, Device::kCuda);
}

}  // namespace

MoeHandle prepare_moe(CudaContext& ctx, const MoeWeights& moe, const ReleaseSource& release) {
  MoeCuda m;
  m.dims = moe_dims(moe);
  m.has_shared = moe.has_shared;
  m.router = prepare_linear(ctx, moe.router, release);
  std::vector<LinearHandle> gate, up, down;
  gate.reserve(moe.experts.size());
  up.reserve(moe.experts.size());
  down.reserve(moe.experts.size());
  for (const ExpertWeights& e : moe.experts) {
    gate.push_back(prepare_linear(ctx, e.gate, release));
    up.push_back(prepare_linear(ctx, e.up, release));
    down.push_back(prepare_linear(ctx, e.down, release));
  }
  m.gate = prepare_grouped(ctx, gate);
  m.up = prepare_grouped(ctx, up);
  m.down = prepare_grouped(ctx, down);
  if (m.has_shared) {
    m.s_gate = prepare_linear(ctx, moe.shared.gate, release);
    m.s_up = prepare_linear(ctx, moe.shared.up, release);
    m.s_down = prepare_linear(ctx, moe.shared.down, release);
    m.s_score = prepare_linear(ctx, moe.shared_gate, release);
  }
  const MoeCuda* kept = ctx.keep(std::move(m));
  return MoeHandle{kept, kept->dims.hidden, kept->dims.experts, static_cast<int>(kept->dims.top_k)};
}

void moe(CudaContext& ctx, const TensorView& x, const MoeHandle& handle, const TensorView& out) {
  if (handle.impl == nullptr) throw std::invalid_argument("moe: the handle was not prepared");
  expect_view(x, DType::kBF16, {-1, handle.hidden}, "moe x");
  expect_view(out, DType::kBF16, {x.dim(0), handle.hidden}, "moe out");
  if (!x.is_contiguous() || !out.is_contiguous()) throw std::invalid_argument("moe: x and out must be contiguous");
  const MoeCuda& m = *static_cast<const MoeCuda*>(handle.impl);
  const int64_t T = x.dim(0);
  if (T == 0) return;
  MoeDims d = m.dims;
  d.tokens = T;
  const MoePlan p = plan_moe(d);
  const int64_t H = d.hidden, I = d.intermediate, Is = d.shared_intermediate, R = p.pairs;
  const int E = static_cast<int>(d.experts), k = static_cast<int>(d.top_k);

  char* base = static_cast<char*>(ctx.scratch.take(p.total, "moe"));
  auto at = [&](const MoeRegion& r) { return static_cast<void*>(base + r.offset); };
  auto i32 = [&](const MoeRegion& r) { return static_cast<int32_t*>(at(r)); };
  auto f32 = [&](const MoeRegion& r) { return static_cast<float*>(at(r)); };
  auto bf16 = [&](const MoeRegion& r) { return static_cast<uint16_t*>(at(r)); };
  const LaunchTarget s(ctx);  // launches through the step-graph recorder

  // The linears on x in one call: the router, and the shared expert's gate, up and score.
  std::array<LinearOut, 4> x_outs = {LinearOut{m.router, device_view(at(p.logits), DType::kF32, T, E)}};
  std::size_t n_x_outs = 1;
  if (m.has_shared) {
    x_outs[n_x_outs++] = {m.s_gate, device_view(at(p.s_gate), DType::kF32, T, Is)};
    x_outs[n_x_outs++] = {m.s_up, device_view(at(p.s_up), DType::kF32, T, Is)};
    x_outs[n_x_outs++] = {m.s_score, device_view(at(p.s_score), DType::kF32, T, 1)};
  }
  linears(ctx, x, std::span<const LinearOut>(x_outs.data(), n_x_outs));

  // Routing.
  launch_moe_route_sort(s, f32(p.logits), T, E, k, i32(p.idx), f32(p.weight), i32(p.hist), i32(p.offsets),
                        i32(p.row_token), i32(p.row_of));
  check_launch("moe route and sort", x);
  launch_moe_gather(s, static_cast<const uint16_t*>(x.data), H, i32(p.row_token), R, bf16(p.x_sorted));
  check_launch("moe gather", x);

  // Routed experts in the grouped order.
  const TensorView x_sorted = device_view(at(p.x_sorted), DType::kBF16, R, H);
  grouped_linear(ctx, m.gate, x_sorted, i32(p.offsets), device_view(at(p.gate), DType::kF32, R, I));
  grouped_linear(ctx, m.up, x_sorted, i32(p.offsets), device_view(at(p.up), DType::kF32, R, I));
  // SwiGLU of the routed rows and of the shared expert in one launch.
  SwigluJob shared_job;
  if (m.has_shared) shared_job = {f32(p.s_gate), f32(p.s_up), T * Is, bf16(p.s_act)};
  launch_moe_swiglu(s, {f32(p.gate), f32(p.up), R * I, bf16(p.act)}, shared_job);
  check_launch("moe swiglu", x);
  grouped_linear(ctx, m.down, device_view(at(p.act), DType::kBF16, R, I), i32(p.offsets),
                 device_view(at(p.down), DType::kF32, R, H));

  // Shared expert's down projection.
  const float* s_score = nullptr;
  const float* s_down = nullptr;
  if (m.has_shared) {
    const LinearOut down_out[] = {{m.s_down, device_view(at(p.s_down), DType::kF32, T, H)}};
    linears(ctx, device_view(at(p.s_act), DType::kBF16, T, Is), down_out);
    s_score = f32(p.s_score);
    s_down = f32(p.s_down);
  }

  launch_moe_combine(s, f32(p.down), i32(p.idx), f32(p.weight), i32(p.row_of), T, k, H, s_score, s_down,
                     static_cast<uint16_t*>(out.data));
  check_launch("moe combine", x, out);
}

}  // namespace fp4serve::kernels::cuda
