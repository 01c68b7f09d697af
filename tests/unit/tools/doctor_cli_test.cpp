// `fp4serve doctor` as an operator runs it: the report's sections, exit 0 for a configuration serve
// would start, exit 1 with the reason for one it would refuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_test_util.h"

namespace fp4serve {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::run_fp4serve;

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";
const std::string kTokenizer = std::string(FP4SERVE_SOURCE_DIR) + "/.cache/tokenizers/qwen3.5";

TEST(DoctorCli, WithoutModelReportsTheMachineAndPasses) {
  const auto r = run_fp4serve("doctor");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"== CPU ==", "cpu: ", "isa: avx2 ", "avx512_bf16 ", "amx_tile ", "kernel path: ", "cores: ",
                        "memory: total ", "== CUDA ==", "CUDA backend: ", "serve runs on: ", "no MODEL given",
                        "== Checks ==", "tensor-parallel-size", "cudnn-sm120", "verdict: ok"})
    EXPECT_THAT(r.output, HasSubstr(s));
}

TEST(DoctorCli, Nvfp4ModelSectionsAndAnOkConfiguration) {
  if (!std::filesystem::exists(kTokenizer + "/tokenizer.json")) GTEST_SKIP() << "no " << kTokenizer << " (scripts/setup.sh)";
  const auto r = run_fp4serve("doctor " + kModels + "tiny-nvfp4 --tokenizer " + kTokenizer +
                              " --kv-cache-memory 64MiB --max-num-seqs 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* s : {"== Model ==", "architecture: Qwen3_5MoeForConditionalGeneration", "quantization: MIXED_PRECISION",
                        "routed experts", "nvfp4_w4a16_g16", "cpu moe experts nvfp4", "attention projections",
                        "GDN projections", "lm_head", "weight bytes: ",
                        "KV cache: fp8_e4m3 (--kv-cache-dtype auto: the checkpoint's FP8 KV), 256 bytes per token",
                        "GDN state bytes per sequence: 107520", "computed, nothing allocated", "CPU KV cache size: ",
                        "Maximum concurrency for", "GDN state: 4 slots", "verdict: ok"})
    EXPECT_THAT(r.output, HasSubstr(s));
  EXPECT_THAT(r.output, Not(HasSubstr("REFUSED")));
}

TEST(DoctorCli, TensorParallelIsRefusedWithExit1) {
  const auto r = run_fp4serve("doctor " + kModels + "tiny-bf16 --tensor-parallel-size 2 --kv-cache-memory 64MiB");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("REFUSED: --tensor-parallel-size 2 is not supported yet"));
  EXPECT_THAT(r.output, HasSubstr("serve would not start"));
}

TEST(DoctorCli, Fp8E5m2KvCacheIsRefused) {
  const auto r = run_fp4serve("doctor " + kModels + "tiny-bf16 --kv-cache-dtype fp8_e5m2 --kv-cache-memory 64MiB");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("REFUSED: --kv-cache-dtype fp8_e5m2 is not supported"));
}

TEST(DoctorCli, MaxNumSeqsTheCacheCannotHoldIsRefused) {
  const auto r = run_fp4serve("doctor " + kModels + "tiny-bf16 --max-num-seqs 100000 --kv-cache-memory 64MiB");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("REFUSED: --max-num-seqs 100000 needs"));
}

TEST(DoctorCli, CaptureSizesBeyondMaxNumSeqsAreRefused) {
  const auto r = run_fp4serve("doctor --max-num-seqs 4 --compilation-config "
                              "'{\"cudagraph_mode\":\"PIECEWISE\",\"cudagraph_capture_sizes\":[1,2,4,8]}'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("REFUSED: CUDA graph capture size 8 is beyond --max-num-seqs 4"));
}

TEST(DoctorCli, AMissingModelIsARefusalAfterTheMachineReport) {
  const auto r = run_fp4serve("doctor no-such-org/no-such-model");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("== CPU =="));
  EXPECT_THAT(r.output, HasSubstr("REFUSED: "));
  EXPECT_THAT(r.output, HasSubstr("models--no-such-org--no-such-model"));
}

TEST(DoctorCli, AcceptsAServeCommandLine) {
  const auto r = run_fp4serve("doctor --host 127.0.0.1 --port 8001 --served-model-name a b --reasoning-parser qwen3 "
                              "--enable-auto-tool-choice --tool-call-parser qwen3_coder --disable-log-stats");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(DoctorCli, ChecksTheTransportFlagsAsServeDoes) {
  const auto ok = run_fp4serve("doctor --allowed-origins '[\"https://app.example\"]' --allowed-methods '[\"GET\"]' "
                               "--allowed-headers '[\"*\"]' --allow-credentials --root-path /llm --uds /tmp/x.sock "
                               "--ssl-cert-reqs 0 --enable-ssl-refresh");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("transport flags (TLS, CORS)        ok: plain http"));
  const auto missing = run_fp4serve("doctor --ssl-certfile /no/such/cert.pem --ssl-keyfile /no/such/key.pem");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("REFUSED: --ssl-certfile '/no/such/cert.pem': no such file"));
  const auto cors = run_fp4serve("doctor --allowed-origins https://app.example");
  EXPECT_EQ(cors.exit_code, 1) << cors.output;
  EXPECT_THAT(cors.output, HasSubstr("REFUSED: --allowed-origins must be a JSON list of strings"));
}

}  // namespace
}  // namespace fp4serve
