// What this x86-64 CPU can run, and which kernel variant the program uses.
//
// Kernels come in variants compiled for different instruction sets (files *_avx2.cpp,
// *_avx512.cpp, *_amx.cpp get those flags from CMake); the rest of the binary stays at the
// x86-64 baseline. The variant is chosen once, at first use: the best this CPU and OS support,
// capped by the environment variable FP4SERVE_CPU_ISA=scalar|avx2|avx512|avx512_bf16|amx (a lower path for
// comparison and debugging; asking for a path the CPU lacks is an error, not a silent fallback).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fp4serve::kernels::cpu {

// Kernel variants, lowest first. kScalar is the plain C++ reference every other variant is tested
// against; kAvx2 needs AVX2+FMA+F16C; kAvx512 needs AVX-512 F/BW/VL/DQ; kAvx512Bf16 needs those plus
// AVX512_BF16 and runs `linear` as bf16 x bf16 -> fp32 dots (VDPBF16PS); kAmx needs kAvx512Bf16,
// AVX512_VBMI and AMX-BF16 tiles the OS lets the process use, and runs `linear` on packed weights
// with TDPBF16PS for every M. kScalar/kAvx2/kAvx512 are bit-identical to each other; kAvx512Bf16
// and kAmx are not (see kernel_table.h for their numerics contracts).
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3, kAmx = 4 };

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512vbmi = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  bool amx_permitted = false;  // the kernel granted tile-data state (arch_prctl XCOMP_PERM)
  int logical_cores = 1;
};

// Detected once (cpuid + xgetbv, and the Linux AMX permission request).
const CpuFeatures& cpu_features();

// The largest CPU cache this machine reports (Linux sysfs, cpu0), in bytes; 0 if unknown. What a
// benchmark must read well past to measure DRAM rather than cache.
int64_t last_level_cache_bytes();

bool isa_supported(Isa isa);
std::vector<Isa> supported_isas();  // lowest first; always contains kScalar
std::string_view isa_name(Isa isa);
Isa parse_isa(std::string_view name);  // throws std::invalid_argument on an unknown name

// The variant every dispatched kernel uses. Reads FP4SERVE_CPU_ISA on first call; throws
// std::runtime_error when it names a path this CPU cannot run.
Isa active_isa();
// Overrides the choice (tests, `--cpu-isa`); throws if unsupported.
void set_active_isa(Isa isa);

// One line for the start-up log: detected features and the chosen variant.
std::string describe_cpu();

}  // namespace fp4serve::kernels::cpu
