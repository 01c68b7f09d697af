#include "kernels/backend.h"

#include <stdexcept>

#include "kernels/cpu/cpu_backend.h"

namespace fp4serve::kernels {

Backend& default_backend() {
  // The CPU tier is chosen here, once (cpu_features.h: the best supported, capped by FP4SERVE_CPU_ISA).
  static cpu::CpuBackend backend(cpu::active_isa());
  return backend;
}

void Backend::replay_step(StepGraph& graph, const std::function<void()>& forward) {
  (void)graph;
  (void)forward;
  throw std::logic_error("replay_step on a backend without step graphs (capture_step returned nullptr)");
}

TensorView DeviceBuffer::view(DType dtype, std::initializer_list<int64_t> shape, std::size_t offset) const {
  TensorView v = TensorView::contiguous(static_cast<char*>(memory_.get()) + offset, dtype, shape, device_);
  if (offset + v.bytes() > bytes_) throw std::out_of_range("DeviceBuffer::view: past the end of the buffer");
  return v;
}

}  // namespace fp4serve::kernels
