// vLLM's CUDA-graph flags parsed on a real CLI11 command (as serve and generate register them) and
// resolved into the engine's CudaGraphSettings; bad values refused naming the flag.
#include "tools/cuda_graph_flags.h"

#include <CLI/CLI.hpp>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tools/compilation_config.h"

namespace fp4serve::tools {
namespace {

using ::testing::HasSubstr;
using engine::CudaGraphMode;

CudaGraphFlags parse_args(std::vector<std::string> args) {
  CLI::App app;
  CudaGraphFlags f;
  add_cuda_graph_flags(app, f);
  std::reverse(args.begin(), args.end());  // CLI11 takes them reversed
  app.parse(args);
  return f;
}

engine::CudaGraphSettings resolve(std::vector<std::string> args) { return resolve_cuda_graph_flags(parse_args(std::move(args))); }

std::string error_of(std::vector<std::string> args) {
  try {
    resolve(std::move(args));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaGraphFlags, DefaultIsVllmsOptimizationLevel2) {
  const engine::CudaGraphSettings s = resolve({});
  EXPECT_EQ(s.mode, CudaGraphMode::kFullAndPiecewise);
  EXPECT_FALSE(s.enforce_eager);
  EXPECT_FALSE(s.capture_sizes);
  EXPECT_FALSE(s.max_capture_size);
}

TEST(CudaGraphFlags, OptimizationLevelsInEveryVllmSpelling) {
  EXPECT_EQ(resolve({"-O0"}).mode, CudaGraphMode::kNone);
  EXPECT_EQ(resolve({"-O1"}).mode, CudaGraphMode::kPiecewise);
  EXPECT_EQ(resolve({"-O3"}).mode, CudaGraphMode::kFullAndPiecewise);
  EXPECT_EQ(resolve({"-O", "0"}).mode, CudaGraphMode::kNone);
  EXPECT_EQ(resolve({"-O=0"}).mode, CudaGraphMode::kNone);
  EXPECT_EQ(resolve({"--optimization-level", "0"}).mode, CudaGraphMode::kNone);
  EXPECT_EQ(resolve({"--optimization-level=2"}).mode, CudaGraphMode::kFullAndPiecewise);
  EXPECT_THAT(error_of({"-O7"}), HasSubstr("-O/--optimization-level"));
  EXPECT_THAT(error_of({"-Ofast"}), HasSubstr("'fast'"));
}

TEST(CudaGraphFlags, CompilationConfigJsonInBothForms) {
  EXPECT_EQ(resolve({"--compilation-config", R"({"cudagraph_mode":"FULL"})"}).mode, CudaGraphMode::kFull);
  EXPECT_EQ(resolve({"--compilation-config", R"({"cudagraph_mode":"full_decode_only"})"}).mode,
            CudaGraphMode::kFullDecodeOnly);
  EXPECT_EQ(resolve({"--compilation-config", R"({"cudagraph_mode":0})"}).mode, CudaGraphMode::kNone);
  EXPECT_EQ(resolve({"-O", R"({"cudagraph_mode":"PIECEWISE"})"}).mode, CudaGraphMode::kPiecewise);
  // The JSON's mode wins over the level's default; torch.compile fields are accepted.
  EXPECT_EQ(resolve({"-O0", "--compilation-config", R"({"cudagraph_mode":"FULL","mode":3,"pass_config":{}})"}).mode,
            CudaGraphMode::kFull);
  const auto s = resolve({"--compilation-config", R"({"cudagraph_capture_sizes":[1,2,4,8],"max_cudagraph_capture_size":8})"});
  EXPECT_EQ(*s.capture_sizes, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(*s.max_capture_size, 8);
}

TEST(CudaGraphFlags, SizesAndEagerFlags) {
  EXPECT_TRUE(resolve({"--enforce-eager"}).enforce_eager);
  EXPECT_EQ(*resolve({"--max-cudagraph-capture-size", "16"}).max_capture_size, 16);
  EXPECT_EQ(*resolve({"--cudagraph-capture-sizes", "1", "2", "4"}).capture_sizes, (std::vector<int>{1, 2, 4}));
  EXPECT_THROW(parse_args({"--max-cudagraph-capture-size", "0"}), CLI::ParseError);
  EXPECT_THAT(error_of({"--max-cudagraph-capture-size", "8", "--compilation-config", R"({"max_cudagraph_capture_size":8})"}),
              HasSubstr("mutually exclusive"));
  EXPECT_THAT(error_of({"--cudagraph-capture-sizes", "1", "--compilation-config", R"({"cudagraph_capture_sizes":[1]})"}),
              HasSubstr("mutually exclusive"));
}

TEST(CudaGraphFlags, BadCompilationConfigNamesTheFlagAndField) {
  EXPECT_THAT(error_of({"--compilation-config", R"({"cudagraph_mode":"SOMETIMES"})"}),
              HasSubstr("--compilation-config: cudagraph_mode \"SOMETIMES\" is not one of NONE, PIECEWISE"));
  EXPECT_THAT(error_of({"--compilation-config", "{not json"}), HasSubstr("is not a JSON object"));
  EXPECT_THAT(error_of({"--compilation-config", R"({"cudagraph_capture_sizes":[0]})"}),
              HasSubstr("cudagraph_capture_sizes must be a positive integer"));
  EXPECT_THAT(error_of({"-O", R"({"cudagraph_mode":7})"}), HasSubstr("-O: cudagraph_mode 7"));
  EXPECT_THAT(error_of({"-O", R"({"cudagraph_mode":"FULL"})", "--compilation-config", "{}"}), HasSubstr("give one"));
}

TEST(CompilationConfig, EmptyTextIsNotGiven) {
  EXPECT_FALSE(parse_compilation_config("").given);
  EXPECT_TRUE(parse_compilation_config("{}").given);
  EXPECT_THROW(parse_compilation_config("[1]"), CompilationConfigError);
}

}  // namespace
}  // namespace fp4serve::tools
