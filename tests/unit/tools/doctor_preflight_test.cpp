// preflight_checks: every known-bad configuration refused with its reason, judged on a fake machine
// (GPU rules) or the tiny checkpoints (model and cache rules).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "checkpoint/weight_loader.h"
#include "tools/preflight_checks.h"

namespace fp4serve::tools {
namespace {

using ::testing::HasSubstr;

const std::string kModels = std::string(FP4SERVE_TEST_DATA_DIR) + "/models/";

const RuleResult& rule(const std::vector<RuleResult>& rs, const std::string& name) {
  const auto it = std::find_if(rs.begin(), rs.end(), [&](const RuleResult& r) { return r.rule == name; });
  if (it == rs.end()) throw std::runtime_error("no rule " + name);
  return *it;
}

HostInfo cpu_host() {
  HostInfo h;
  h.mem_total_bytes = 16ull << 30;
  h.mem_available_bytes = 8ull << 30;
  return h;
}

// A host whose GPU engine serves, with `n` GPUs of one kind.
HostInfo gpu_host(const std::string& name, int major, int minor, int n, int cudnn) {
  HostInfo h = cpu_host();
  h.gpu_backend = true;
  for (int i = 0; i < n; ++i) h.gpus.push_back({name, major, minor, 96ull << 30});
  h.cuda_driver_version = 13000;
  h.cudnn_version = cudnn;
  return h;
}

TEST(Preflight, DefaultsOnCpuRefuseNothing) {
  EXPECT_TRUE(preflight_refusals(ServeSettings{}, cpu_host()).empty());
  // The GPU rules say why they do not apply.
  const auto all = evaluate_preflight(ServeSettings{}, cpu_host());
  EXPECT_EQ(rule(all, "cudnn-sm120").verdict, Verdict::kNotApplicable);
  EXPECT_EQ(rule(all, "cache-plan").verdict, Verdict::kNotApplicable);
}

TEST(Preflight, ServeInlineRefusalsKeepTheirMessages) {
  ServeSettings s;
  s.tensor_parallel_size = 2;
  s.gpu_memory_utilization = "0.9";
  s.reasoning_parser = "deepseek_r1";
  s.enable_auto_tool_choice = true;
  s.generation_config = "mine";
  s.engine.kv_cache_dtype = "fp8_e5m2";
  const auto r = preflight_refusals(s, cpu_host());
  std::vector<std::string> names;
  for (const auto& x : r) names.push_back(x.rule);
  EXPECT_THAT(names, ::testing::IsSupersetOf({"tensor-parallel-size", "gpu-memory-utilization", "reasoning-parser",
                                              "auto-tool-choice", "generation-config", "kv-cache-dtype"}));
  EXPECT_THAT(rule(r, "tensor-parallel-size").detail,
              HasSubstr("--tensor-parallel-size 2 is not supported yet: the CPU backend runs on one process"));
  EXPECT_THAT(rule(r, "kv-cache-dtype").detail, HasSubstr("fp8_e5m2 and nvfp4 KV caches are not implemented"));
  try {
    enforce_preflight(s, cpu_host());
    FAIL() << "expected PreflightRefused";
  } catch (const PreflightRefused& e) {
    EXPECT_THAT(e.what(), HasSubstr("configuration problems"));
    EXPECT_THAT(e.what(), HasSubstr("only qwen3 is supported"));
  }
}

TEST(Preflight, Sm120WithCudnnBeforeTheFixIsRefused) {
  const auto old = evaluate_preflight(ServeSettings{}, gpu_host("NVIDIA RTX PRO 6000 Blackwell", 12, 0, 1, 91900));
  EXPECT_EQ(rule(old, "cudnn-sm120").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(old, "cudnn-sm120").detail, HasSubstr("cuDNN 9.19.0"));
  EXPECT_THAT(rule(old, "cudnn-sm120").detail, HasSubstr("9.23.1"));
  // The fixed release and the first one after it pass; so does SM121.
  EXPECT_EQ(rule(evaluate_preflight({}, gpu_host("RTX PRO 6000", 12, 0, 1, 92301)), "cudnn-sm120").verdict, Verdict::kOk);
  EXPECT_EQ(rule(evaluate_preflight({}, gpu_host("RTX PRO 6000", 12, 0, 1, 92400)), "cudnn-sm120").verdict, Verdict::kOk);
  EXPECT_EQ(rule(evaluate_preflight({}, gpu_host("DGX Spark", 12, 1, 1, 92000)), "cudnn-sm120").verdict,
            Verdict::kRefused);
  // Hopper is not affected.
  EXPECT_EQ(rule(evaluate_preflight({}, gpu_host("H200", 9, 0, 1, 91900)), "cudnn-sm120").verdict,
            Verdict::kNotApplicable);
}

TEST(Preflight, Nvfp4KvCacheNeedsSm100) {
  ServeSettings s;
  s.engine.kv_cache_dtype = "nvfp4";
  const auto sm120 = evaluate_preflight(s, gpu_host("RTX 5070 Ti", 12, 0, 2, 92400));
  EXPECT_EQ(rule(sm120, "nvfp4-kv-cache").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(sm120, "nvfp4-kv-cache").detail, HasSubstr("sm100f"));
  EXPECT_THAT(rule(sm120, "nvfp4-kv-cache").detail, HasSubstr("RTX 5070 Ti (sm_120)"));
  EXPECT_EQ(rule(evaluate_preflight(s, gpu_host("H200", 9, 0, 1, 0)), "nvfp4-kv-cache").verdict, Verdict::kRefused);
  EXPECT_EQ(rule(evaluate_preflight(s, gpu_host("B200", 10, 0, 1, 0)), "nvfp4-kv-cache").verdict, Verdict::kOk);
  // And the CPU backend has no NVFP4 KV cache at all.
  EXPECT_EQ(rule(evaluate_preflight(s, cpu_host()), "kv-cache-dtype").verdict, Verdict::kRefused);
}

TEST(Preflight, CudaGraphCaptureSizesBeyondMaxNumSeqsAreRefused) {
  ServeSettings s;
  s.engine.max_num_seqs = 8;
  s.gpu.compilation_config = R"({"cudagraph_mode":"PIECEWISE","cudagraph_capture_sizes":[1,2,4,8]})";
  const HostInfo h = gpu_host("RTX 5070 Ti", 12, 0, 1, 92400);
  EXPECT_EQ(rule(evaluate_preflight(s, h), "cudagraph-capture-sizes").verdict, Verdict::kOk);
  s.gpu.compilation_config = R"({"cudagraph_capture_sizes":[1,2,4,8,16]})";
  const auto big = evaluate_preflight(s, h);
  EXPECT_EQ(rule(big, "cudagraph-capture-sizes").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(big, "cudagraph-capture-sizes").detail, HasSubstr("16 is beyond --max-num-seqs 8"));
  // No graphs with --enforce-eager.
  s.gpu.enforce_eager = true;
  EXPECT_EQ(rule(evaluate_preflight(s, h), "cudagraph-capture-sizes").verdict, Verdict::kNotApplicable);
  // --max-cudagraph-capture-size alone counts too.
  ServeSettings m;
  m.engine.max_num_seqs = 8;
  m.gpu.max_cudagraph_capture_size = 64;
  EXPECT_EQ(rule(evaluate_preflight(m, h), "cudagraph-capture-sizes").verdict, Verdict::kRefused);
}

TEST(Preflight, MaxCaptureSizeMustEqualTheLargestListedSize) {
  ServeSettings s;
  s.engine.max_num_seqs = 128;
  s.gpu.compilation_config = R"({"cudagraph_capture_sizes":[1,2,4,8]})";
  s.gpu.max_cudagraph_capture_size = 64;
  const auto r = evaluate_preflight(s, gpu_host("RTX 5090", 12, 0, 1, 92400));
  EXPECT_EQ(rule(r, "cudagraph-capture-size-consistent").verdict, Verdict::kRefused);
  s.gpu.max_cudagraph_capture_size = 8;
  EXPECT_EQ(rule(evaluate_preflight(s, gpu_host("RTX 5090", 12, 0, 1, 92400)), "cudagraph-capture-size-consistent").verdict,
            Verdict::kOk);
}

TEST(Preflight, CompilationConfigMustParse) {
  ServeSettings s;
  s.gpu.compilation_config = "{not json";
  EXPECT_EQ(rule(evaluate_preflight(s, cpu_host()), "compilation-config").verdict, Verdict::kRefused);
  s.gpu.compilation_config = R"({"cudagraph_mode":"SOMETIMES"})";
  EXPECT_THAT(rule(evaluate_preflight(s, cpu_host()), "compilation-config").detail, HasSubstr("SOMETIMES"));
}

TEST(Preflight, TensorParallelBeyondTheGpuCountIsRefused) {
  ServeSettings s;
  s.tensor_parallel_size = 4;
  const auto r = evaluate_preflight(s, gpu_host("RTX 5070 Ti", 12, 0, 2, 92400));
  EXPECT_EQ(rule(r, "gpu-count").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(r, "gpu-count").detail, HasSubstr("needs 4 GPUs, 2 visible"));
  s.tensor_parallel_size = 2;
  EXPECT_TRUE(preflight_refusals(s, gpu_host("RTX 5070 Ti", 12, 0, 2, 92400)).empty());
}

TEST(Preflight, Sm120BackendTraps) {
  ServeSettings s;
  s.gpu.moe_backend = "flashinfer-cutlass";  // vLLM normalises '-' and case
  s.gpu.attention_backend = "FLASHINFER";
  const auto r = evaluate_preflight(s, gpu_host("RTX 5070 Ti", 12, 0, 2, 92400));
  EXPECT_EQ(rule(r, "moe-backend").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(r, "moe-backend").detail, HasSubstr("broken on SM120"));
  EXPECT_EQ(rule(r, "attention-backend").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(r, "attention-backend").detail, HasSubstr("vllm#40677"));
  // The same flags on Hopper are fine; b12x is the SM120 answer.
  EXPECT_TRUE(preflight_refusals(s, gpu_host("H200", 9, 0, 1, 0)).empty());
  s.gpu.moe_backend = "flashinfer_b12x";
  s.gpu.attention_backend = "auto";
  EXPECT_TRUE(preflight_refusals(s, gpu_host("RTX 5070 Ti", 12, 0, 1, 92400)).empty());
  // The CPU backend has no backends to pick.
  EXPECT_EQ(rule(evaluate_preflight(s, cpu_host()), "moe-backend").verdict, Verdict::kRefused);
  s.gpu.moe_backend = "warp_drive";
  EXPECT_THAT(rule(evaluate_preflight(s, gpu_host("H200", 9, 0, 1, 0)), "moe-backend").detail,
              HasSubstr("not one of vLLM's MoE backends"));
}

ModelFacts tiny(const std::string& name) {
  LoadOptions o;
  o.show_progress = false;
  const auto ck = LoadedCheckpoint::open(kModels + name, o);
  return model_facts(ck, "");
}

TEST(Preflight, ModelFactsOfTheTinyNvfp4Checkpoint) {
  const ModelFacts f = tiny("tiny-nvfp4");
  EXPECT_TRUE(f.checkpoint_fp8_kv);
  EXPECT_TRUE(f.nvfp4_experts);
  EXPECT_EQ(f.num_attention_layers, 1);
  EXPECT_EQ(f.num_gdn_layers, 3);
  EXPECT_EQ(f.gdn_state_bytes_per_seq, 107520u);  // as `inspect` prints
  EXPECT_THAT(f.tokenizer_problem, HasSubstr("no tokenizer.json"));  // the tiny models carry none
}

TEST(Preflight, CachePlanPreviewMatchesTheEngineArithmetic) {
  ServeSettings s;
  s.model = tiny("tiny-nvfp4");
  s.engine.kv_cache_memory = "64MiB";
  s.engine.max_num_seqs = 4;
  const engine::CachePlan p = preview_cache_plan(*s.model, s.engine, cpu_host());
  // 64 MiB: 4 slots x 107520, snapshots 25% of the rest, KV blocks of 16 tokens x 256 bytes (fp8).
  const uint64_t left = (64ull << 20) - 4 * 107520;
  const uint64_t snaps = static_cast<uint64_t>(static_cast<double>(left) * 0.25 / 107520) * 107520;
  EXPECT_EQ(p.num_kv_blocks, static_cast<int>((left - snaps) / (16 * 256)));
  EXPECT_EQ(p.max_num_seqs, 4);
  // A --max-num-seqs the state budget cannot hold is refused with the engine's message.
  s.engine.max_num_seqs = 100000;
  const auto r = evaluate_preflight(s, cpu_host());
  EXPECT_EQ(rule(r, "cache-plan").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(r, "cache-plan").detail, HasSubstr("--max-num-seqs 100000 needs"));
}

TEST(Preflight, CachePlanPreviewCountsMtpSpeculativeDecoding) {
  ServeSettings s;
  s.model = tiny("tiny-nvfp4");
  s.engine.kv_cache_memory = "64MiB";
  s.engine.max_num_seqs = 4;
  const engine::CachePlan plain = preview_cache_plan(*s.model, s.engine, cpu_host());
  s.engine.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 2})";
  const engine::CachePlan mtp = preview_cache_plan(*s.model, s.engine, cpu_host());
  // The MTP layer's KV in every block (2 attention layers' worth instead of 1) and 2 rollback
  // entries per sequence out of the state budget: fewer blocks.
  EXPECT_LT(mtp.num_kv_blocks, plain.num_kv_blocks / 2 + 1);
}

TEST(Preflight, SpeculativeConfigNeedsTheCheckpointsMtpBlock) {
  ServeSettings s;
  s.model = tiny("tiny-bf16");  // has one (tools/reference/make_tiny_mtp.py)
  EXPECT_EQ(rule(evaluate_preflight(s, cpu_host()), "speculative-config").verdict, Verdict::kNotApplicable);
  s.engine.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 2})";
  EXPECT_EQ(rule(evaluate_preflight(s, cpu_host()), "speculative-config").verdict, Verdict::kOk);
  s.model = tiny("tiny-fp8");  // has none
  const auto r = evaluate_preflight(s, cpu_host());
  EXPECT_EQ(rule(r, "speculative-config").verdict, Verdict::kRefused);
  EXPECT_THAT(rule(r, "speculative-config").detail, HasSubstr("MTP speculative decoding is unavailable"));
  s.engine.speculative_config = R"({"method": "ngram", "num_speculative_tokens": 2})";
  EXPECT_THAT(rule(evaluate_preflight(s, cpu_host()), "speculative-config").detail,
              HasSubstr("method 'ngram' is not supported"));
}

TEST(Preflight, MaxModelLenBeyondTheModelIsRefused) {
  ServeSettings s;
  s.model = tiny("tiny-bf16");
  s.engine.max_model_len = 1 << 20;
  EXPECT_THAT(rule(evaluate_preflight(s, cpu_host()), "max-model-len").detail,
              HasSubstr("larger than the model's max_position_embeddings 4096"));
}

}  // namespace
}  // namespace fp4serve::tools
