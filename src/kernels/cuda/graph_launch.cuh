// Every kernel an op enqueues goes through launch_kernel, so that step graphs can check it
// (graph_recorder.h): in eager mode it is a plain <<<...>>> launch; while a step is captured the
// launch's signature is recorded and the launch captured; while a replay fills, the signature is
// compared with the captured one and nothing is launched.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/graph_recorder.h"
#include "kernels/cuda/launch_target.h"

namespace fp4serve::kernels::cuda {

// The argument as the kernel receives it (converted to the parameter's type), padding cleared so
// that two launches with the same values have the same bytes.
template <class P, class A>
void append_kernel_arg(std::vector<uint8_t>& out, const A& a) {
  using T = std::remove_cv_t<std::remove_reference_t<P>>;
  static_assert(std::is_trivially_copyable_v<T>, "kernel arguments are trivially copyable");
  T v = a;
  __builtin_clear_padding(&v);
  append_bytes(out, v);
}

inline std::array<uint32_t, 3> dims_of(dim3 d) { return {d.x, d.y, d.z}; }

// kernel<<<grid, block, smem, to.stream>>>(args...), through the recorder. The caller still checks
// the launch (check_launch), which is harmless when nothing was launched.
template <class... P, class... A>
void launch_kernel(const LaunchTarget& to, const char* op, void (*kernel)(P...), dim3 grid, dim3 block,
                   std::size_t smem, const A&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch_kernel: one argument per kernel parameter");
  if (to.graph != nullptr && to.graph->mode() != GraphMode::kEager) {
    LaunchSignature s;
    s.op = op;
    s.func = reinterpret_cast<const void*>(kernel);
    s.grid = dims_of(grid);
    s.block = dims_of(block);
    s.smem = smem;
    (append_kernel_arg<P>(s.args, args), ...);
    if (!to.graph->on_launch(std::move(s))) return;
  }
  kernel<<<grid, block, smem, to.stream>>>(args...);
}

}  // namespace fp4serve::kernels::cuda
