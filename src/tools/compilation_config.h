// vLLM's --compilation-config (and -O JSON) as fp4serve reads it: the one parser that serve, generate
// and doctor's preflight share. Only the CUDA-graph fields matter here (cudagraph_mode,
// cudagraph_capture_sizes, max_cudagraph_capture_size); the torch.compile fields (mode, level,
// backend, pass_config, custom_ops, ...) are accepted and have nothing to act on.
// [vllm: config/compilation.py CompilationConfig]
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/cuda_graph_sizes.h"

namespace fp4serve::tools {

struct CompilationConfig {
  bool given = false;
  std::optional<engine::CudaGraphMode> cudagraph_mode;
  std::optional<std::vector<int>> cudagraph_capture_sizes;
  std::optional<int> max_cudagraph_capture_size;
};

// A bad --compilation-config (message names the flag and the field, as vLLM's validation errors do).
class CompilationConfigError : public std::runtime_error {
 public:
  explicit CompilationConfigError(const std::string& what) : std::runtime_error(what) {}
};

// "" = not given. `flag` names the flag in errors ("--compilation-config" or "-O"). cudagraph_mode
// is case-insensitive (vLLM's CUDAGraphMode[value.upper()]) and may be the enum's integer value
// (0 NONE, 1 PIECEWISE, 2 FULL). Throws CompilationConfigError.
CompilationConfig parse_compilation_config(const std::string& text, const std::string& flag = "--compilation-config");

}  // namespace fp4serve::tools
