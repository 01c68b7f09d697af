// Per-block limits every kernel is written against, for both architectures the fatbinary holds.
// Shared memory is the seeds' crash class: a kernel tuned for Hopper's 227 KB opt-in launched on an
// RTX 50xx / PRO 6000 (99 KB) fails at run time. Kernels that take dynamic shared memory
// static_assert their size against kMaxSmemPerBlockSm120 (or pick a per-arch variant by
// DeviceInfo::sm() and assert each against its own limit); scripts/cuda_resource_check.py checks the
// static shared memory, registers and spills of the compiled kernels in CI.
#pragma once

#include <cstddef>

namespace fp4serve::kernels::cuda {

inline constexpr std::size_t kMaxSmemPerBlockSm90 = 227 * 1024;   // opt-in maximum, H100/H200
inline constexpr std::size_t kMaxSmemPerBlockSm120 = 99 * 1024;   // opt-in maximum, RTX 50xx / PRO 6000
inline constexpr std::size_t kMaxSmemDefault = 48 * 1024;         // without cudaFuncSetAttribute opt-in
inline constexpr int kWarpSize = 32;

}  // namespace fp4serve::kernels::cuda
