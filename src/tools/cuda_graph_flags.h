// vLLM's CUDA-graph flags on serve, generate and doctor, parsed as vLLM parses them
// [vllm: engine/arg_utils.py, utils/argparse_utils.py, config/vllm.py OptimizationLevel]:
//   --enforce-eager                     no graphs
//   -O0 .. -O3, -O N, -O=N, --optimization-level N
//                                       the level's default cudagraph_mode: 0 NONE, 1 PIECEWISE,
//                                       2 (vLLM's default) and 3 FULL_AND_PIECEWISE
//   -O '{json}'                         (older vLLM: -O was --compilation-config) the same as
//   --compilation-config '{json}'       cudagraph_mode (wins over the level), cudagraph_capture_sizes,
//                                       max_cudagraph_capture_size (compilation_config.h)
//   --max-cudagraph-capture-size N      the largest size (mutually exclusive with the JSON's field)
//   --cudagraph-capture-sizes N ...     the sizes (mutually exclusive with the JSON's field)
// resolve_cuda_graph_flags turns them into the engine's CudaGraphSettings (cuda_graph_sizes.h).
#pragma once

#include <string>
#include <vector>

#include "engine/cuda_graph_sizes.h"

namespace CLI {
class App;
}

namespace fp4serve::tools {

struct CudaGraphFlags {
  bool enforce_eager = false;
  std::string compilation_config;      // --compilation-config JSON
  int max_cudagraph_capture_size = 0;  // --max-cudagraph-capture-size (0 = not given)
  std::string optimization_level;      // -O / --optimization-level ("" = not given: 2)
  std::vector<int> cudagraph_capture_sizes;  // --cudagraph-capture-sizes (empty = not given)
};
void add_cuda_graph_flags(CLI::App& cmd, CudaGraphFlags& flags);

// Throws std::runtime_error naming the flag for a bad value (serve/generate exit 1 with it).
engine::CudaGraphSettings resolve_cuda_graph_flags(const CudaGraphFlags& flags);

}  // namespace fp4serve::tools
