// Helpers shared by the checkpoint tests: a temporary directory removed at the end of the test, and
// raw file writing for crafting malformed safetensors files byte by byte.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

namespace fp4serve::testing {

// A small Qwen3.5-MoE text config: 4 layers (3 linear + 1 full), 4 experts; with_mtp declares one MTP
// layer (mtp_num_hidden_layers).
inline std::string tiny_config_json(bool with_mtp) {
  return std::string(R"({
  "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
  "text_config": {"model_type": "qwen3_5_moe_text", "hidden_size": 64, "num_hidden_layers": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "attn_output_gate": true,
    "rope_parameters": {"mrope_interleaved": true, "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.25,
                        "rope_theta": 10000000, "rope_type": "default"},
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
    "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4, "num_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32, "rms_norm_eps": 1e-6,
    "vocab_size": 128, "tie_word_embeddings": false)") +
         (with_mtp ? R"(, "mtp_num_hidden_layers": 1}})" : "}}");
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "fp4serve-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    if (info != nullptr) name += std::string("-") + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& p, std::string_view content) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  ASSERT_TRUE(out.good()) << p;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// 8-byte little-endian length prefix.
inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A safetensors file: length prefix, the header text as given (no padding), then `data_bytes`
// bytes of data.
inline std::string safetensors_bytes(std::string_view header, size_t data_bytes) {
  return le64(header.size()) + std::string(header) + std::string(data_bytes, '\x5a');
}

}  // namespace fp4serve::testing
