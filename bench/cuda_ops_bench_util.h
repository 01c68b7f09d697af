// Helpers of bench/cuda_ops_bench.cpp: random host data (finite values: the kernels' speed does not
// depend on them), device buffers through the Backend interface, host weights in the checkpoint
// formats, and the report (markdown table and JSON) the benchmark rewrites after every case.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tensor/float_formats.h"

namespace fp4serve::cuda_ops_bench {

using namespace fp4serve::kernels;

// ---- random host data (the kernels' speed does not depend on the values; they are finite) ---------
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24); }  // [0, 1)
  float normal_ish() { return (uniform() + uniform() + uniform() - 1.5f) * 2.0f; }
};
inline std::vector<uint16_t> random_bf16(std::size_t n, uint64_t seed, float scale = 1.0f) {
  Rng r(seed);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = f32_to_bf16(r.normal_ish() * scale);
  return v;
}
inline std::vector<float> random_f32(std::size_t n, uint64_t seed, float scale = 1.0f) {
  Rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = r.normal_ish() * scale;
  return v;
}
// Finite e4m3 codes of moderate magnitude (exponent field 3..8: no NaN, no saturation).
inline std::vector<uint8_t> random_e4m3(std::size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<uint8_t> v(n);
  for (auto& x : v) {
    const uint64_t b = r.next();
    x = static_cast<uint8_t>((b & 0x80) | ((3 + (b >> 8) % 6) << 3) | ((b >> 16) & 7));
  }
  return v;
}
inline std::vector<uint8_t> random_bytes(std::size_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; i += 8) {
    const uint64_t b = r.next();
    std::memcpy(v.data() + i, &b, std::min<std::size_t>(8, n - i));
  }
  return v;
}

// ---- device buffers through the backend ------------------------------------------------------------
struct Tensor {
  DeviceBuffer buf;
  TensorView view;
};
inline Tensor alloc(Backend& b, DType t, std::initializer_list<int64_t> shape, const char* what) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor x;
  x.buf = b.allocate(static_cast<std::size_t>(n) * dtype_size(t), what);
  x.view = x.buf.view(t, shape);
  return x;
}
template <class T>
inline Tensor upload(Backend& b, DType t, std::initializer_list<int64_t> shape, const std::vector<T>& host, const char* what) {
  Tensor x = alloc(b, t, shape, what);
  if (x.view.bytes() != host.size() * sizeof(T)) throw std::logic_error(std::string("upload size: ") + what);
  b.upload(x.view, host.data());
  return x;
}
// Fills a large device buffer with `pattern` (host bytes) repeated: one upload, then device copies.
inline void fill_repeating(Backend& b, const DeviceBuffer& buf, const std::vector<uint8_t>& pattern) {
  const std::size_t chunk = std::min(pattern.size(), buf.bytes());
  const TensorView first = buf.view(DType::kU8, {static_cast<int64_t>(chunk)});
  b.upload(first, pattern.data());
  for (std::size_t off = chunk; off < buf.bytes(); off += chunk) {
    const std::size_t n = std::min(chunk, buf.bytes() - off);
    b.copy(buf.view(DType::kU8, {static_cast<int64_t>(n)}, off), buf.view(DType::kU8, {static_cast<int64_t>(n)}));
  }
  b.synchronize();
}

// ---- host weights in the checkpoint formats ------------------------------------------------------
struct HostWeight {
  WeightLayout format = WeightLayout::kBf16;
  int64_t n = 0, k = 0;
  std::vector<uint8_t> data, scales;
  WeightView view() const {
    switch (format) {
      case WeightLayout::kBf16: return bf16_weight(reinterpret_cast<const uint16_t*>(data.data()), n, k);
      case WeightLayout::kFp8Tensor: return fp8_tensor_weight(data.data(), 1e-2f, n, k);
      case WeightLayout::kNvfp4: return nvfp4_weight(data.data(), scales.data(), 1e-3f, n, k);
      default: throw std::logic_error("HostWeight: format not benchmarked");
    }
  }
  std::size_t bytes() const { return data.size() + scales.size(); }
};
inline HostWeight host_weight(WeightLayout f, int64_t n, int64_t k, uint64_t seed) {
  HostWeight w{f, n, k, {}, {}};
  const std::size_t nk = static_cast<std::size_t>(n * k);
  switch (f) {
    case WeightLayout::kBf16: {  // random sign and mantissa, exponent 2^-11 .. 2^-4 (fast for 1 GB)
      w.data = random_bytes(nk * 2, seed);
      auto* p = reinterpret_cast<uint16_t*>(w.data.data());
      for (std::size_t i = 0; i < nk; ++i) p[i] = static_cast<uint16_t>((p[i] & 0x807F) | ((116 + ((p[i] >> 7) & 7)) << 7));
      break;
    }
    case WeightLayout::kFp8Tensor: w.data = random_e4m3(nk, seed); break;
    case WeightLayout::kNvfp4:
      w.data = random_bytes(nk / 2, seed);  // every nibble is a finite e2m1 value
      w.scales = random_e4m3(nk / 16, seed + 1);
      break;
    default: throw std::logic_error("host_weight: format not benchmarked");
  }
  return w;
}
inline const char* format_name(WeightLayout f) {
  switch (f) {
    case WeightLayout::kBf16: return "bf16";
    case WeightLayout::kFp8Tensor: return "fp8";
    case WeightLayout::kNvfp4: return "nvfp4";
    default: return "?";
  }
}

// ---- results ---------------------------------------------------------------------------------------
struct Result {
  std::string op, shape, format;
  int64_t m = 0;
  double us = 0, bytes = 0, flops = 0;
  std::string status = "ok";  // or "not implemented: ...", "error: ...", "skipped: ..."
};

inline std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

class Report {
 public:
  Report(std::filesystem::path dir, std::string device) : dir_(std::move(dir)), device_(std::move(device)) {}
  double copy_gbs = 0;
  std::vector<Result> results;

  void write() const {
    std::ofstream md(dir_ / "cuda_ops_bench.md");
    md << "# CUDA op benchmark\n\nDevice: " << device_ << "\n\nCopy bandwidth (cudaMemcpy D2D, 1 GiB, read + write): "
       << fmt(copy_gbs, 0) << " GB/s\n\n"
       << "Time per call (CUDA events, median of batches); GB/s = bytes the op must move (weights + activations "
          "read once, outputs written once) / time; %copy = that over the copy bandwidth.\n\n"
       << "| op | shape | M | format | us/call | GB/s | %copy | TFLOP/s | status |\n"
       << "|---|---|---:|---|---:|---:|---:|---:|---|\n";
    for (const Result& r : results) {
      const bool ok = r.status == "ok" && r.us > 0;
      const double gbs = ok ? r.bytes / (r.us * 1e3) : 0;
      md << "| " << r.op << " | " << r.shape << " | " << r.m << " | " << r.format << " | " << (ok ? fmt(r.us, 1) : "-")
         << " | " << (ok ? fmt(gbs, 0) : "-") << " | " << (ok && copy_gbs > 0 ? fmt(100 * gbs / copy_gbs, 0) + "%" : "-")
         << " | " << (ok && r.flops > 0 ? fmt(r.flops / (r.us * 1e6), 2) : "-") << " | " << r.status << " |\n";
    }
    std::ofstream js(dir_ / "cuda_ops_bench.json");
    js << "{\n  \"device\": \"" << json_escape(device_) << "\",\n  \"copy_bandwidth_gbs\": " << copy_gbs
       << ",\n  \"cases\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      const bool ok = r.status == "ok" && r.us > 0;
      const double gbs = ok ? r.bytes / (r.us * 1e3) : 0;
      js << "    {\"op\": \"" << json_escape(r.op) << "\", \"shape\": \"" << json_escape(r.shape) << "\", \"m\": " << r.m
         << ", \"format\": \"" << r.format << "\", \"status\": \"" << json_escape(r.status) << "\", \"us\": " << r.us
         << ", \"bytes\": " << r.bytes << ", \"flops\": " << r.flops << ", \"gbs\": " << gbs
         << ", \"copy_fraction\": " << (copy_gbs > 0 ? gbs / copy_gbs : 0)
         << ", \"tflops\": " << (ok && r.us > 0 ? r.flops / (r.us * 1e6) : 0) << "}"
         << (i + 1 < results.size() ? ",\n" : "\n");
    }
    js << "  ]\n}\n";
  }

  static std::string fmt(double v, int digits) {
    char b[32];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
  }

 private:
  std::filesystem::path dir_;
  std::string device_;
};

}  // namespace fp4serve::cuda_ops_bench
