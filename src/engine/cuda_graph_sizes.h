// Which CUDA graphs the engine captures (docs/ARCHITECTURE.md, "Step graphs"): vLLM's cudagraph_mode
// and capture sizes, resolved exactly as vLLM resolves them [vllm: config/vllm.py
// VllmConfig._set_cudagraph_sizes, config/compilation.py CUDAGraphMode], and the padding rule a
// pure-decode step of B sequences follows: the graph of the smallest capture size >= B, none above
// the largest.
//
// fp4serve captures one kind of graph: the FULL graph of a pure-decode step (every sequence one
// token). So NONE means eager; FULL, FULL_DECODE_ONLY and FULL_AND_PIECEWISE all mean full graphs for
// pure-decode steps with every other step eager (what FULL_DECODE_ONLY is in vLLM); PIECEWISE, which
// has no counterpart here, runs the same full decode graphs (logged as such).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::engine {

enum class CudaGraphMode { kNone, kPiecewise, kFull, kFullDecodeOnly, kFullAndPiecewise };

// vLLM's names ("NONE", "FULL_AND_PIECEWISE", ...).
std::string_view cudagraph_mode_name(CudaGraphMode mode);
// Case-insensitive, as vLLM's CUDAGraphMode[value.upper()]; nullopt for an unknown name.
std::optional<CudaGraphMode> parse_cudagraph_mode(std::string_view name);
// Whether the mode asks for any graph (everything but NONE): fp4serve then captures its full
// pure-decode graphs.
inline bool captures_decode_graphs(CudaGraphMode mode) { return mode != CudaGraphMode::kNone; }

// What the user asked for (flags; unset fields take vLLM's defaults).
struct CudaGraphSettings {
  CudaGraphMode mode = CudaGraphMode::kNone;  // EngineConfig's default: eager (tests, embedders)
  bool enforce_eager = false;
  std::optional<std::vector<int>> capture_sizes;  // compilation_config.cudagraph_capture_sizes
  std::optional<int> max_capture_size;            // --max-cudagraph-capture-size / max_cudagraph_capture_size
};

// The sizes to capture, as vLLM computes them.
struct CudaGraphPlan {
  std::vector<int> sizes;  // ascending; empty: no graphs (NONE or --enforce-eager)
  int max_size = 0;        // vLLM's final max_cudagraph_capture_size (0 without graphs)
  std::vector<std::string> warnings;  // vLLM's warnings ("Truncating max_cudagraph_capture_size to N")
};

// vLLM's _set_cudagraph_sizes: without an explicit max, min(max_num_seqs * (1 + drafts) * 2, 512);
// then at most max_num_batched_tokens; an explicit list is de-duplicated, sorted and cut at
// max_num_batched_tokens; the default list is [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)
// up to the max. Throws EngineConfigError with vLLM's message when an explicit max and an explicit
// list disagree, or when an explicit list is empty or holds a size < 1.
CudaGraphPlan plan_cuda_graphs(const CudaGraphSettings& settings, int max_num_seqs, int max_num_batched_tokens,
                               int num_speculative_tokens = 0);

// The sizes a runner whose steps hold at most max_num_seqs sequences can use: every size up to the
// first one >= max_num_seqs (a pure-decode step never has more sequences, so larger graphs would
// never be replayed).
std::vector<int> usable_capture_sizes(std::span<const int> sizes, int max_num_seqs);

// The start-up line saying what the mode means here (vLLM's "Cudagraph is disabled under eager mode";
// PIECEWISE says what runs instead of piecewise graphs).
std::string describe_cuda_graphs(const CudaGraphSettings& settings, const CudaGraphPlan& plan);

// The capture size a pure-decode step of `batch` sequences pads to: the smallest size >= batch; 0
// when batch is above the largest (the step runs eagerly). `sizes` ascending.
int padded_graph_size(std::span<const int> sizes, int batch);

}  // namespace fp4serve::engine
