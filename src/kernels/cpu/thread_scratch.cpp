#include "kernels/cpu/thread_scratch.h"

#include <atomic>

namespace fp4serve::kernels::cpu {
namespace {

std::array<std::atomic<std::size_t>, static_cast<std::size_t>(Scratch::kCount)>& floors() {
  static std::array<std::atomic<std::size_t>, static_cast<std::size_t>(Scratch::kCount)> f{};
  return f;
}

}  // namespace

void raise_scratch_floor(Scratch slot, std::size_t bytes) {
  std::atomic<std::size_t>& f = floors()[static_cast<std::size_t>(slot)];
  std::size_t cur = f.load(std::memory_order_relaxed);
  while (cur < bytes && !f.compare_exchange_weak(cur, bytes, std::memory_order_relaxed)) {
  }
}

std::size_t scratch_floor(Scratch slot) {
  return floors()[static_cast<std::size_t>(slot)].load(std::memory_order_relaxed);
}

}  // namespace fp4serve::kernels::cpu
