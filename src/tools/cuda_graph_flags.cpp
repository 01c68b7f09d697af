#include "tools/cuda_graph_flags.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <stdexcept>

#include "tools/compilation_config.h"

namespace fp4serve::tools {

void add_cuda_graph_flags(CLI::App& cmd, CudaGraphFlags& f) {
  cmd.add_flag("--enforce-eager", f.enforce_eager, "no CUDA graphs: every step runs eagerly");
  cmd.add_option("--compilation-config", f.compilation_config,
                 "JSON: cudagraph_mode (NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE), "
                 "cudagraph_capture_sizes, max_cudagraph_capture_size; e.g. '{\"cudagraph_mode\":\"FULL\"}'");
  cmd.add_option("--max-cudagraph-capture-size", f.max_cudagraph_capture_size,
                 "largest decode batch captured as a CUDA graph (default min(2 x max-num-seqs, 512))")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--cudagraph-capture-sizes", f.cudagraph_capture_sizes, "decode batch sizes captured as CUDA graphs")
      ->expected(1, -1)
      ->check(CLI::PositiveNumber);
  cmd.add_option("-O,--optimization-level", f.optimization_level,
                 "0: no CUDA graphs; 1, 2 (default), 3: full graphs of pure-decode steps; or a compilation "
                 "config JSON object (older vLLM's -O)");
}

engine::CudaGraphSettings resolve_cuda_graph_flags(const CudaGraphFlags& f) {
  engine::CudaGraphSettings s;
  s.enforce_eager = f.enforce_eager;
  // -O=3 reaches CLI11 as "=3" (vLLM strips the '=').
  std::string level = f.optimization_level;
  if (!level.empty() && level.front() == '=') level.erase(0, 1);
  std::string json = f.compilation_config;
  int opt = 2;  // vLLM's default optimization level
  if (!level.empty()) {
    if (level.size() == 1 && level[0] >= '0' && level[0] <= '3') {
      opt = level[0] - '0';
    } else if (level.front() == '{') {
      if (!json.empty())
        throw std::runtime_error("-O '{...}' and --compilation-config both give a compilation config: give one");
      json = level;
    } else {
      throw std::runtime_error(fmt::format("argument -O/--optimization-level: invalid OptimizationLevel value: '{}' "
                                           "(choose from 0, 1, 2, 3, or give a compilation config JSON object)",
                                           level));
    }
  }
  const CompilationConfig cc = parse_compilation_config(json, json == f.compilation_config ? "--compilation-config" : "-O");
  constexpr engine::CudaGraphMode kLevelModes[] = {engine::CudaGraphMode::kNone, engine::CudaGraphMode::kPiecewise,
                                                   engine::CudaGraphMode::kFullAndPiecewise,
                                                   engine::CudaGraphMode::kFullAndPiecewise};
  s.mode = cc.cudagraph_mode.value_or(kLevelModes[opt]);
  if (f.max_cudagraph_capture_size > 0 && cc.max_cudagraph_capture_size)
    throw std::runtime_error("max_cudagraph_capture_size and compilation_config.max_cudagraph_capture_size are "
                             "mutually exclusive (--max-cudagraph-capture-size and --compilation-config)");
  if (!f.cudagraph_capture_sizes.empty() && cc.cudagraph_capture_sizes)
    throw std::runtime_error("cudagraph_capture_sizes and compilation_config.cudagraph_capture_sizes are mutually "
                             "exclusive (--cudagraph-capture-sizes and --compilation-config)");
  if (f.max_cudagraph_capture_size > 0) s.max_capture_size = f.max_cudagraph_capture_size;
  else s.max_capture_size = cc.max_cudagraph_capture_size;
  if (!f.cudagraph_capture_sizes.empty()) s.capture_sizes = f.cudagraph_capture_sizes;
  else s.capture_sizes = cc.cudagraph_capture_sizes;
  return s;
}

}  // namespace fp4serve::tools
