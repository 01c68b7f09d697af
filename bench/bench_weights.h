// Synthetic weights for the microbenchmarks: stacks of linear weights in each checkpoint format with
// finite random values (the kernels' speed does not depend on the values, NaNs aside), and the
// bytes/flops bookkeeping the benchmarks report as GB/s and GFLOP/s counters.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <memory>
#include <string>
#include <vector>

#include <cstdlib>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/packed_weight.h"
#include "kernels/weights.h"
#include "tensor/float_formats.h"

namespace fp4serve::benchutil {

using kernels::WeightLayout;
using kernels::WeightView;

inline uint32_t lcg(uint32_t& s) { return s = s * 1664525u + 1013904223u; }

// Bytes a benchmark must rotate through so that its weights come from DRAM: twice the last-level
// cache this machine reports, at least 64 MiB (a fixed 64 MiB stayed inside the 480 MiB L3 of some
// machines and measured cache bandwidth); FP4SERVE_BENCH_ROTATE_MIB overrides it (e.g. 1 for
// cache-resident, compute-bound figures).
inline int64_t dram_rotation_bytes() {
  if (const char* e = std::getenv("FP4SERVE_BENCH_ROTATE_MIB"); e != nullptr) return std::atoll(e) << 20;
  return std::max<int64_t>(int64_t{64} << 20, 2 * kernels::cpu::last_level_cache_bytes());
}

// `v` as the model binds it for `isa`: packed into panels (kept alive in `keep`) when that tier has
// a panel kernel, else as is.
inline WeightView bind_for(const WeightView& v, kernels::cpu::Isa isa,
                           std::vector<std::unique_ptr<kernels::PackedWeight>>& keep) {
  if (kernels::cpu::kernel_table(isa).linear_packed == nullptr || !kernels::packable(v)) return v;
  keep.push_back(std::make_unique<kernels::PackedWeight>(kernels::pack_weight(v)));
  return kernels::with_packed(v, *keep.back());
}

// A finite e4m3 byte (exponent field 0..14: never the NaN pattern S.1111.111).
inline uint8_t random_e4m3(uint32_t& s) { return static_cast<uint8_t>((lcg(s) >> 24) & 0xF7); }
inline uint16_t random_bf16(uint32_t& s) {
  return fp4serve::f32_to_bf16(static_cast<float>(static_cast<int32_t>(lcg(s) >> 16) - 32768) / 32768.0f * 0.05f);
}

// `count` weights [n, k] of one format, stored back to back so a benchmark can rotate through more
// bytes than the last-level cache holds (each call then streams from DRAM, as a decode step does).
struct WeightStack {
  WeightLayout format = WeightLayout::kBf16;
  int64_t count = 1, n = 0, k = 0;
  std::vector<uint8_t> data, scales;
  std::vector<float> block_scales;  // kFp8Block: [ceil(n/128), ceil(k/128)] per weight
  mutable std::vector<std::unique_ptr<kernels::PackedWeight>> packed_;  // view_for's panels
  mutable std::vector<WeightView> bound_;                               // and the views over them

  WeightStack(WeightLayout f, int64_t count_, int64_t n_, int64_t k_) : format(f), count(count_), n(n_), k(k_) {
    uint32_t s = 12345u + static_cast<uint32_t>(n * 31 + k);
    switch (f) {
      case WeightLayout::kBf16: {
        data.resize(static_cast<size_t>(count * n * k * 2));
        auto* p = reinterpret_cast<uint16_t*>(data.data());
        for (int64_t i = 0; i < count * n * k; ++i) p[i] = random_bf16(s);
        break;
      }
      case WeightLayout::kFp8Tensor:
      case WeightLayout::kFp8Block:
        data.resize(static_cast<size_t>(count * n * k));
        for (auto& b : data) b = random_e4m3(s);
        block_scales.assign(static_cast<size_t>(count * block_rows() * block_cols()), 1e-3f);
        break;
      case WeightLayout::kNvfp4:
        data.resize(static_cast<size_t>(count * n * k / 2));
        scales.resize(static_cast<size_t>(count * n * k / 16));
        for (auto& b : data) b = static_cast<uint8_t>(lcg(s) >> 24);
        for (auto& b : scales) b = static_cast<uint8_t>(0x28 + (lcg(s) >> 29));
        break;
      default:
        throw std::invalid_argument("WeightStack: format not benchmarked");
    }
  }
  int64_t block_rows() const { return (n + 127) / 128; }
  int64_t block_cols() const { return (k + 127) / 128; }

  // Stack size that spans at least `bytes` (so rotating through it misses the cache).
  static int64_t count_for(WeightLayout f, int64_t n, int64_t k, int64_t bytes) {
    const int64_t one = bytes_of(f, n, k);
    return std::max<int64_t>(1, (bytes + one - 1) / one);
  }
  static int64_t bytes_of(WeightLayout f, int64_t n, int64_t k) {
    switch (f) {
      case WeightLayout::kBf16: return n * k * 2;
      case WeightLayout::kFp8Tensor: return n * k;
      case WeightLayout::kFp8Block: return n * k + ((n + 127) / 128) * ((k + 127) / 128) * 4;
      case WeightLayout::kNvfp4: return n * k / 2 + n * k / 16;
      default: return 0;
    }
  }
  int64_t bytes_per_weight() const { return bytes_of(format, n, k); }

  // view(i) as the model binds it for `isa` (packed_weight.h panels on the panel tiers; packed once).
  WeightView view_for(int64_t i, kernels::cpu::Isa isa) const {
    if (kernels::cpu::kernel_table(isa).linear_packed == nullptr) return view(i);
    if (bound_.empty())
      for (int64_t j = 0; j < count; ++j) bound_.push_back(bind_for(view(j), isa, packed_));
    return bound_[static_cast<size_t>(i % count)];
  }

  WeightView view(int64_t i) const {
    i %= count;
    switch (format) {
      case WeightLayout::kBf16:
        return kernels::bf16_weight(reinterpret_cast<const uint16_t*>(data.data()) + i * n * k, n, k);
      case WeightLayout::kFp8Tensor: return kernels::fp8_tensor_weight(data.data() + i * n * k, 1e-3f, n, k);
      case WeightLayout::kFp8Block:
        return kernels::fp8_block_weight(data.data() + i * n * k, block_scales.data() + i * block_rows() * block_cols(),
                                         false, n, k);
      case WeightLayout::kNvfp4:
        return kernels::nvfp4_weight(data.data() + i * n * k / 2, scales.data() + i * n * k / 16, 1e-3f, n, k);
      default: throw std::invalid_argument("WeightStack: format not benchmarked");
    }
  }
};

inline const char* short_format_name(WeightLayout f) {
  switch (f) {
    case WeightLayout::kBf16: return "bf16";
    case WeightLayout::kFp8Tensor: return "fp8_tensor";
    case WeightLayout::kFp8Block: return "fp8_block128";
    case WeightLayout::kNvfp4: return "nvfp4";
    default: return "other";
  }
}

// GB/s and GFLOP/s counters from per-iteration bytes and flops.
inline void set_rate_counters(benchmark::State& state, double bytes_per_iter, double flops_per_iter) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iter, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// The CPU paths this machine runs (kernels/cpu/cpu_features.h), lowest first, as benchmark args.
inline std::vector<int> isa_args() {
  std::vector<int> out;
  for (kernels::cpu::Isa i : kernels::cpu::supported_isas()) out.push_back(static_cast<int>(i));
  return out;
}
inline std::string isa_label(int isa) { return std::string(kernels::cpu::isa_name(static_cast<kernels::cpu::Isa>(isa))); }

}  // namespace fp4serve::benchutil
