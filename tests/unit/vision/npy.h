// A minimal .npy (format 1.0, C order) reader for the vision goldens: uint8 and little-endian
// float32 arrays as numpy.save writes them.
#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4serve::vision::testing {

struct Npy {
  std::string dtype;  // "|u1" or "<f4"
  std::vector<std::int64_t> shape;
  std::vector<char> data;
  template <class T>
  std::vector<T> as() const {
    std::vector<T> out(data.size() / sizeof(T));
    std::memcpy(out.data(), data.data(), out.size() * sizeof(T));
    return out;
  }
};

inline std::vector<std::uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  return std::vector<std::uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline Npy read_npy(const std::string& path) {
  const auto bytes = read_bytes(path);
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) throw std::runtime_error("not npy: " + path);
  const std::size_t header_len = bytes[8] | (bytes[9] << 8);
  const std::string header(bytes.begin() + 10, bytes.begin() + 10 + header_len);
  Npy out;
  const auto d = header.find("'descr': '");
  out.dtype = header.substr(d + 10, header.find('\'', d + 10) - d - 10);
  const auto s = header.find("'shape': (");
  std::stringstream shape(header.substr(s + 10, header.find(')', s) - s - 10));
  std::string dim;
  while (std::getline(shape, dim, ',')) {
    if (dim.find_first_not_of(' ') != std::string::npos) out.shape.push_back(std::stoll(dim));
  }
  out.data.assign(bytes.begin() + 10 + header_len, bytes.end());
  return out;
}

// tests/data/vision/ (made by tools/reference/make_image_goldens.py) and its manifest.json.
inline const std::string kDir = std::string(FP4SERVE_TEST_DATA_DIR) + "/vision/";

inline nlohmann::json manifest() {
  const auto bytes = read_bytes(kDir + "manifest.json");
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

}  // namespace fp4serve::vision::testing
