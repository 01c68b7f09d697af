#include "tools/compilation_config.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fp4serve::tools {
namespace {

int positive_int(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (1 << 20))
    throw CompilationConfigError(fmt::format("{} must be a positive integer, got {}", where, v.dump()));
  return static_cast<int>(v.get<int64_t>());
}

}  // namespace

CompilationConfig parse_compilation_config(const std::string& text, const std::string& flag) {
  CompilationConfig c;
  if (text.empty()) return c;
  c.given = true;
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) throw CompilationConfigError(fmt::format("{} '{}' is not a JSON object", flag, text));
  if (const auto it = j.find("cudagraph_mode"); it != j.end() && !it->is_null()) {
    const std::string valid = "NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE";
    if (it->is_string()) {
      c.cudagraph_mode = engine::parse_cudagraph_mode(it->get<std::string>());
      if (!c.cudagraph_mode)
        throw CompilationConfigError(fmt::format("{}: cudagraph_mode {} is not one of {}", flag, it->dump(), valid));
    } else if (it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() <= 2) {
      constexpr engine::CudaGraphMode kByValue[] = {engine::CudaGraphMode::kNone, engine::CudaGraphMode::kPiecewise,
                                                    engine::CudaGraphMode::kFull};
      c.cudagraph_mode = kByValue[it->get<int64_t>()];
    } else {
      throw CompilationConfigError(fmt::format("{}: cudagraph_mode {} is not one of {}", flag, it->dump(), valid));
    }
  }
  if (const auto it = j.find("cudagraph_capture_sizes"); it != j.end() && !it->is_null()) {
    if (!it->is_array())
      throw CompilationConfigError(fmt::format("{}: cudagraph_capture_sizes must be a list of batch sizes", flag));
    std::vector<int> sizes;
    for (const auto& v : *it) sizes.push_back(positive_int(v, flag + ": cudagraph_capture_sizes"));
    c.cudagraph_capture_sizes = std::move(sizes);
  }
  if (const auto it = j.find("max_cudagraph_capture_size"); it != j.end() && !it->is_null())
    c.max_cudagraph_capture_size = positive_int(*it, flag + ": max_cudagraph_capture_size");
  return c;
}

}  // namespace fp4serve::tools
