// Per-thread, grow-only scratch of the CPU kernels (internal to src/kernels/cpu). A kernel asks for
// n elements of one of its slots and gets this thread's buffer for that slot, reallocated only when n
// exceeds what the thread already holds; contents are not kept between calls. After the first steps
// at the largest shapes a serving process's steps allocate nothing (engine step_allocation_test
// counts), and nothing is zeroed or page-faulted afresh per layer as std::vector locals were.
//
// Slots keep the buffers of one call apart: two live buffers of a kernel need two slots. The
// OpenMP worker threads persist, so their thread_local buffers do too.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>

namespace fp4serve::kernels::cpu {

enum class Scratch : uint8_t {
  kLinearX,       // linear: fp32 copy of bf16 input rows (linear_bf16, CpuBackend::linears)
  kLinearJobs,    // CpuBackend::linears: its job list
  kLinearBlocks,  // linear_batch: per-job block offsets
  kLinearTile,    // a linear kernel call's private tile scratch
  kNormRow,
  kRope,
  kAttnSeqs, kAttnItems, kAttnQ, kAttnK, kAttnV, kAttnAcc, kAttnScores, kAttnSums,
  kConvWeights, kConvRing, kConvPre,
  kGdnQ, kGdnK, kGdnV, kGdnOut, kGdnDecay, kGdnBeta, kGdnStep, kGdnFirst,
  kMoeIdx, kMoeOffsets, kMoeToken, kMoeSlot, kMoeFill, kMoeRowOf, kMoeJobs, kMoeSlots, kMoeAcc, kMoeProbs,
  kMoeOrder, kMoeXf, kMoeLogits, kMoeRw, kMoeXg, kMoeG, kMoeU, kMoeSg, kMoeSu, kMoeSgate, kMoeD, kMoeSd,
  kCount
};

// The least bytes a thread's buffer for `slot` is given when it is (re)allocated: CpuBackend::reserve
// sets these from the step limits, so each thread allocates a slot once, on first use, at the size
// every later step fits in. Raising only; any thread.
void raise_scratch_floor(Scratch slot, std::size_t bytes);
std::size_t scratch_floor(Scratch slot);

namespace detail {

struct AlignedFree {
  void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
};

struct ScratchBuffer {
  std::unique_ptr<std::byte[], AlignedFree> bytes;
  std::size_t capacity = 0;
};

inline std::byte* scratch_bytes(Scratch slot, std::size_t bytes) {
  thread_local std::array<ScratchBuffer, static_cast<std::size_t>(Scratch::kCount)> buffers;
  ScratchBuffer& b = buffers[static_cast<std::size_t>(slot)];
  if (b.capacity < bytes) {
    // Headroom beyond a step that exceeds the floor: a slightly larger next step does not regrow.
    const std::size_t grown = std::max(bytes + bytes / 4 + 64, scratch_floor(slot));
    b.bytes.reset(static_cast<std::byte*>(::operator new[](grown, std::align_val_t{64})));
    b.capacity = grown;
  }
  return b.bytes.get();
}

}  // namespace detail

// n elements of T (trivially constructible), 64-byte aligned, uninitialized.
template <class T>
T* scratch(Scratch slot, std::size_t n) {
  return reinterpret_cast<T*>(detail::scratch_bytes(slot, n * sizeof(T)));
}

}  // namespace fp4serve::kernels::cpu
