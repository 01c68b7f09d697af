// --speculative-config (vLLM's JSON) for the checkpoint's MTP layer: the method names vLLM accepts
// for Qwen3.5/3.6 MTP are taken, every other method and key is refused by name; a checkpoint without
// its MTP layer (synth --no-mtp, as some conversions ship) loads and serves but refuses speculation
// with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "checkpoint/weight_loader.h"
#include "tools/engine_setup.h"
#include "tools/speculative_config.h"
#include "tools/synth_writer.h"

namespace fp4serve::tools {
namespace {

std::string error_of(const std::string& json) {
  try {
    parse_speculative_config(json);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(SpeculativeConfig, TakesVllmsMtpMethodNames) {
  for (const char* method : {"mtp", "qwen3_5_mtp", "qwen3_next_mtp"}) {
    const SpeculativeSettings s =
        parse_speculative_config(std::string("{\"method\": \"") + method + "\", \"num_speculative_tokens\": 3}");
    EXPECT_TRUE(s.enabled);
    EXPECT_EQ(s.num_speculative_tokens, 3);
    EXPECT_NE(s.decision.find(method), std::string::npos) << s.decision;
  }
  EXPECT_TRUE(parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 1, "model": null})").enabled);
}

TEST(SpeculativeConfig, RefusesOtherMethodsKeysAndCountsByName) {
  for (const char* method : {"eagle", "eagle3", "ngram", "draft_model", "medusa", "deepseek_mtp", "suffix"}) {
    const std::string e = error_of(std::string("{\"method\": \"") + method + "\", \"num_speculative_tokens\": 2}");
    EXPECT_NE(e.find(std::string("method '") + method + "' is not supported"), std::string::npos) << e;
  }
  EXPECT_NE(error_of(R"({"method": "mtp", "num_speculative_tokens": 2, "prompt_lookup_max": 4})")
                .find("key 'prompt_lookup_max' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "mtp", "num_speculative_tokens": 0})").find("num_speculative_tokens must be"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"method": "mtp", "num_speculative_tokens": 33})").find("num_speculative_tokens must be"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"num_speculative_tokens": 2})").find("method is required"), std::string::npos);
  EXPECT_NE(error_of(R"({"method": "mtp", "model": "Qwen/Qwen3.6-35B-A3B", "num_speculative_tokens": 2})")
                .find("separate draft model"),
            std::string::npos);
  EXPECT_NE(error_of("mtp").find("is not a JSON object"), std::string::npos);
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("fp4serve-spec-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(SpeculativeConfig, ACheckpointWithoutMtpServesButRefusesSpeculationWithTheReason) {
  TempDir dir;
  synth::SynthOptions o;
  o.dims = synth::SynthDims::tiny();
  o.dims.num_hidden_layers = 4;
  o.format = synth::SynthFormat::kNVFP4;
  o.out_dir = dir.path();
  o.progress = ByteProgress::Mode::kOff;
  o.mtp = false;
  synth::synthesize(o);
  const LoadedCheckpoint ck = LoadedCheckpoint::open(dir.path().string());
  EXPECT_FALSE(ck.has_mtp());
  EXPECT_NE(ck.mtp_unavailable_reason().find("no mtp.* tensors"), std::string::npos) << ck.mtp_unavailable_reason();
  EngineFlags flags;
  flags.tokenizer = (std::filesystem::path(FP4SERVE_SOURCE_DIR) / ".cache" / "tokenizers" / "qwen3.5").string();
  flags.kv_cache_memory = "64MiB";
  EXPECT_NO_THROW(load_serving_model(dir.path().string(), flags));
  flags.speculative_config = R"({"method": "mtp", "num_speculative_tokens": 2})";
  try {
    load_serving_model(dir.path().string(), flags);
    FAIL() << "expected a refusal";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("MTP speculative decoding is unavailable: the checkpoint has no mtp.* tensors"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace fp4serve::tools
