// Errors of the CUDA backend: every failure surfaces as a CudaError naming the op and the shapes of
// its arguments ("cuda rmsnorm [x bf16 [7, 2048], out bf16 [7, 2048]]: an illegal memory access ..."),
// never as an abort or a silent wrong result. Kernels are asynchronous: a fault inside one is
// reported by the next call that synchronizes; FP4SERVE_CUDA_SYNC=1 makes every op synchronize so
// that the error names the op that faulted (CUDA_LAUNCH_BLOCKING's purpose, per op).
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <string_view>

#include "kernels/tensor_view.h"

namespace fp4serve::kernels::cuda {

struct CudaError : std::runtime_error {
  CudaError(std::string_view op, std::string_view detail, cudaError_t code)
      : std::runtime_error(message(op, detail, code)), code(code) {}
  static std::string message(std::string_view op, std::string_view detail, cudaError_t code) {
    std::string m = "cuda " + std::string(op);
    if (!detail.empty()) m += " [" + std::string(detail) + "]";
    m += ": ";
    m += code == cudaSuccess ? "failed" : cudaGetErrorString(code);
    return m;
  }
  cudaError_t code;
};

// "BF16 [7, 2048]" (strided rows marked "rows strided").
inline std::string describe_view(const TensorView& v) {
  std::string s = std::string(dtype_name(v.dtype)) + " [";
  for (int i = 0; i < v.rank; ++i) s += (i ? ", " : "") + std::to_string(v.shape[static_cast<size_t>(i)]);
  s += "]";
  if (!v.is_contiguous()) s += " rows strided";
  return s;
}

inline void append_detail(std::string&) {}
template <class... Rest>
void append_detail(std::string& s, const TensorView& v, const Rest&... rest);
template <class... Rest>
void append_detail(std::string& s, std::string_view text, const Rest&... rest) {
  s += s.empty() ? "" : ", ";
  s += text;
  append_detail(s, rest...);
}
template <class... Rest>
void append_detail(std::string& s, const TensorView& v, const Rest&... rest) {
  s += s.empty() ? "" : ", ";
  s += describe_view(v);
  append_detail(s, rest...);
}

// Throws a CudaError for `code` unless it is cudaSuccess; `details` (TensorViews and strings) are
// formatted only on failure.
template <class... Details>
void check(cudaError_t code, std::string_view op, const Details&... details) {
  if (code == cudaSuccess) return;
  std::string d;
  append_detail(d, details...);
  throw CudaError(op, d, code);
}

// After a kernel launch: a bad configuration (too much shared memory, too many threads) is reported
// at once by cudaGetLastError, with the op's arguments.
template <class... Details>
void check_launch(std::string_view op, const Details&... details) {
  check(cudaGetLastError(), op, details...);
}

}  // namespace fp4serve::kernels::cuda
