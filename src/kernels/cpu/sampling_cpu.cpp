#include "kernels/cpu/sampling_cpu.h"

#include <stdexcept>

namespace fp4serve::kernels::cpu {

void sample_rows(float*, std::span<const SampleRow>, const SamplingConfig&, std::span<SampleResult>) {
  throw std::logic_error("the CPU sampling op is not implemented yet (the engine samples with engine::Sampler)");
}

}  // namespace fp4serve::kernels::cpu
