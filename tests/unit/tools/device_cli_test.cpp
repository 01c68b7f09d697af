// --device on the command line (serve, generate, bench model, doctor) with the real binary: cpu is
// today's behaviour, auto says which device and why, cuda without a GPU fails before the load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "cli_test_util.h"
#include "tools/device_choice.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_fp4serve;

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";
const std::string kGenerate = "generate --model " + kModels + "tiny-bf16 --prompt-ids 70,272,78,216 -n 8 --ignore-eos";

bool gpu_here() { return tools::probe_cuda().device_count > 0; }

// The generated ids: the digits and spaces that start the first line starting with a digit (stdout;
// stderr's "prefill: ..." may follow on the same line of the merged output).
std::string ids_line(const std::string& output) {
  std::size_t at = 0;
  while (at < output.size()) {
    const std::size_t end = output.find('\n', at);
    const std::string line = output.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (!line.empty() && line[0] >= '0' && line[0] <= '9') return line.substr(0, line.find_first_not_of("0123456789 "));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "";
}

TEST(DeviceCli, CpuGeneratesWhatTheDefaultGeneratedBefore) {
  const auto cpu = run_fp4serve(kGenerate + " --device cpu");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.output;
  EXPECT_THAT(cpu.output, HasSubstr("device: cpu (--device cpu)"));
  const std::string ids = ids_line(cpu.output);
  EXPECT_FALSE(ids.empty()) << cpu.output;
  if (gpu_here()) return;  // auto is the GPU there
  const auto dflt = run_fp4serve(kGenerate);
  ASSERT_EQ(dflt.exit_code, 0) << dflt.output;
  EXPECT_EQ(ids_line(dflt.output), ids);
}

TEST(DeviceCli, AutoWithoutAGpuRunsOnTheCpuAndSaysWhy) {
  if (gpu_here()) GTEST_SKIP() << "a CUDA device is visible: auto picks it";
  const auto r = run_fp4serve(kGenerate + " --device auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("device: cpu (no CUDA device usable: "));
}

TEST(DeviceCli, CudaWithoutAGpuFailsBeforeLoadingAnything) {
  if (gpu_here()) GTEST_SKIP() << "a CUDA device is visible";
  const std::string batch = ::testing::TempDir() + "/fp4serve_device_batch.txt";
  std::ofstream(batch) << "ids: 1,2,3\n";
  for (const std::string& cmd :
       {kGenerate + " --device cuda", "serve " + kModels + "tiny-bf16 --device cuda --port 1",
        "generate --model " + kModels + "tiny-bf16 --batch " + batch + " --device cuda",
        "bench model --model " + kModels + "tiny-bf16 --device cuda"}) {
    const auto r = run_fp4serve(cmd);
    EXPECT_NE(r.exit_code, 0) << cmd << "\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr("--device cuda: no CUDA device usable: ")) << cmd;
    EXPECT_THAT(r.output, Not(HasSubstr("prefill:"))) << cmd;
  }
  const auto bad = run_fp4serve(kGenerate + " --device tpu");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.output, HasSubstr("--device tpu: use auto, cpu or cuda"));
}

TEST(DeviceCli, DoctorNamesTheCudaStateAndJudgesDevice) {
  const auto r = run_fp4serve("doctor");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("<- what --device auto picks here"));
  EXPECT_THAT(r.output, HasSubstr("serve runs on: device: "));
  if (gpu_here()) {
    EXPECT_THAT(r.output, HasSubstr("CUDA device 0: "));
    return;
  }
  EXPECT_THAT(r.output, HasSubstr("CUDA devices: none usable: "));
  EXPECT_THAT(r.output, HasSubstr("serve runs on: device: cpu (no CUDA device usable: "));
  const auto cuda = run_fp4serve("doctor --device cuda");
  EXPECT_EQ(cuda.exit_code, 1) << cuda.output;
  EXPECT_THAT(cuda.output, HasSubstr("REFUSED: --device cuda: no CUDA device usable"));
  // On the CPU --gpu-memory-utilization stays refused, as before the flag moved to the engine flags.
  const auto util = run_fp4serve("doctor --gpu-memory-utilization 0.8");
  EXPECT_EQ(util.exit_code, 1) << util.output;
  EXPECT_THAT(util.output, HasSubstr("--gpu-memory-utilization applies to GPUs"));
}

}  // namespace
}  // namespace fp4serve
