// Reader for the goldens tools/reference writes next to each tiny model: goldens.json (prompts,
// greedy continuations, an index of tensors) and goldens.bin (the tensors' bytes, bf16 or f32).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tensor/float_formats.h"

namespace fp4serve::testing {

struct Goldens {
  nlohmann::json meta;
  std::string bin;

  // stem "mtp_goldens": the MTP head's (tools/reference/make_tiny_mtp.py), same layout.
  static Goldens load(const std::filesystem::path& dir, const std::string& stem = "goldens") {
    Goldens g;
    std::ifstream js(dir / (stem + ".json"));
    if (!js) throw std::runtime_error("missing " + (dir / (stem + ".json")).string());
    g.meta = nlohmann::json::parse(js);
    std::ifstream bin(dir / (stem + ".bin"), std::ios::binary);
    g.bin.assign(std::istreambuf_iterator<char>(bin), {});
    return g;
  }

  std::vector<std::vector<int32_t>> prompts() const { return meta.at("prompts").get<std::vector<std::vector<int32_t>>>(); }

  std::vector<int32_t> greedy(const std::string& run, size_t prompt) const {
    return meta.at("runs").at(run).at(prompt).at("greedy_tokens").get<std::vector<int32_t>>();
  }
  std::vector<float> margins(const std::string& run, size_t prompt) const {
    return meta.at("runs").at(run).at(prompt).at("greedy_top2_margins").get<std::vector<float>>();
  }

  bool has(const std::string& name) const { return meta.at("tensors").contains(name); }
  std::vector<int64_t> shape(const std::string& name) const {
    return meta.at("tensors").at(name).at("shape").get<std::vector<int64_t>>();
  }
  // The tensor as fp32 values.
  std::vector<float> tensor(const std::string& name) const {
    const auto& t = meta.at("tensors").at(name);
    const size_t off = t.at("offset"), n = t.at("nbytes");
    const std::string dtype = t.at("dtype");
    if (off + n > bin.size()) throw std::runtime_error("goldens.bin too short for " + name);
    std::vector<float> out;
    if (dtype == "bf16") {
      out.resize(n / 2);
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t b;
        std::memcpy(&b, bin.data() + off + 2 * i, 2);
        out[i] = bf16_to_f32(b);
      }
    } else if (dtype == "f32") {
      out.resize(n / 4);
      std::memcpy(out.data(), bin.data() + off, n);
    } else {
      throw std::runtime_error("unknown golden dtype " + dtype);
    }
    return out;
  }
};

}  // namespace fp4serve::testing
