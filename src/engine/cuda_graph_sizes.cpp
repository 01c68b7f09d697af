#include "engine/cuda_graph_sizes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>

#include "engine/engine_error.h"

namespace fp4serve::engine {
namespace {

struct ModeName {
  CudaGraphMode mode;
  std::string_view name;
};
constexpr ModeName kModes[] = {{CudaGraphMode::kNone, "NONE"},
                               {CudaGraphMode::kPiecewise, "PIECEWISE"},
                               {CudaGraphMode::kFull, "FULL"},
                               {CudaGraphMode::kFullDecodeOnly, "FULL_DECODE_ONLY"},
                               {CudaGraphMode::kFullAndPiecewise, "FULL_AND_PIECEWISE"}};

std::string sizes_text(const std::vector<int>& v) {
  return fmt::format("[{}]", fmt::join(v, ", "));
}

}  // namespace

std::string_view cudagraph_mode_name(CudaGraphMode mode) {
  for (const ModeName& m : kModes)
    if (m.mode == mode) return m.name;
  return "NONE";
}

std::optional<CudaGraphMode> parse_cudagraph_mode(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const ModeName& m : kModes)
    if (m.name == upper) return m.mode;
  return std::nullopt;
}

CudaGraphPlan plan_cuda_graphs(const CudaGraphSettings& s, int max_num_seqs, int max_num_batched_tokens,
                               int num_speculative_tokens) {
  CudaGraphPlan plan;
  if (s.enforce_eager || !captures_decode_graphs(s.mode)) return plan;  // vLLM: max 0, no sizes
  int max_size = 0;
  if (s.max_capture_size) {
    max_size = *s.max_capture_size;
  } else {
    const int decode_query_len = 1 + std::max(0, num_speculative_tokens);
    max_size = std::min(max_num_seqs * decode_query_len * 2, 512);
  }
  max_size = std::min(max_num_batched_tokens, max_size);
  if (max_size < 1)
    throw EngineConfigError("Maximum cudagraph size should be greater than or equal to 1 when using cuda graph.");
  std::vector<int> sizes;
  if (s.capture_sizes) {
    if (s.capture_sizes->empty())
      throw EngineConfigError("cudagraph_capture_sizes should contain at least one element when using cuda graph.");
    for (int v : *s.capture_sizes) {
      if (v < 1) throw EngineConfigError(fmt::format("cudagraph_capture_sizes: {} is not a positive batch size", v));
      if (v <= max_num_batched_tokens && std::find(sizes.begin(), sizes.end(), v) == sizes.end()) sizes.push_back(v);
    }
    std::sort(sizes.begin(), sizes.end());
  } else {
    for (int v : {1, 2, 4})
      if (v <= max_size) sizes.push_back(v);
    for (int v = 8; max_size >= 8 && v < std::min(max_size + 1, 256); v += 8) sizes.push_back(v);
    for (int v = 256; max_size >= 256 && v <= max_size; v += 16) sizes.push_back(v);
  }
  const int valid_max = sizes.empty() ? 0 : sizes.back();
  if (s.max_capture_size && *s.max_capture_size != valid_max) {
    if (s.capture_sizes)
      throw EngineConfigError(fmt::format("customized max_cudagraph_capture_size(={}) should be consistent with the "
                                          "max value of cudagraph_capture_sizes(={})",
                                          *s.max_capture_size, valid_max));
    plan.warnings.push_back(fmt::format("Truncating max_cudagraph_capture_size to {}", valid_max));
  }
  if (s.capture_sizes && sizes.size() < s.capture_sizes->size())
    plan.warnings.push_back(fmt::format("cudagraph_capture_sizes specified in compilation_config {} is overridden by "
                                        "config {}",
                                        sizes_text(*s.capture_sizes), sizes_text(sizes)));
  plan.sizes = std::move(sizes);
  plan.max_size = valid_max;
  return plan;
}

std::vector<int> usable_capture_sizes(std::span<const int> sizes, int max_num_seqs) {
  std::vector<int> out;
  for (int v : sizes) {
    out.push_back(v);
    if (v >= max_num_seqs) break;
  }
  return out;
}

std::string describe_cuda_graphs(const CudaGraphSettings& s, const CudaGraphPlan& plan) {
  if (s.enforce_eager) return "Cudagraph is disabled under eager mode (--enforce-eager): every step runs eagerly";
  if (!captures_decode_graphs(s.mode)) return "cudagraph_mode NONE: every step runs eagerly";
  const std::string sizes = plan.sizes.empty() ? std::string("no sizes")
                                               : fmt::format("{} sizes ({} .. {})", plan.sizes.size(),
                                                             plan.sizes.front(), plan.sizes.back());
  if (s.mode == CudaGraphMode::kPiecewise)
    return fmt::format("cudagraph_mode PIECEWISE: fp4serve has no piecewise graphs; it captures full graphs of "
                       "pure-decode steps instead at {}, and runs every other step eagerly",
                       sizes);
  return fmt::format("cudagraph_mode {}: full graphs of pure-decode steps at {}; prefill and mixed steps run eagerly",
                     cudagraph_mode_name(s.mode), sizes);
}

int padded_graph_size(std::span<const int> sizes, int batch) {
  if (batch < 1) return 0;
  const auto it = std::lower_bound(sizes.begin(), sizes.end(), batch);
  return it == sizes.end() ? 0 : *it;
}

}  // namespace fp4serve::engine
