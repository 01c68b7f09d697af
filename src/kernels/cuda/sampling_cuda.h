// Sampling on CUDA (sampling.h's semantics and numerics contract): the processors, greedy, and the
// random path over the full vocabulary rows in device memory; the uniforms come from the host's
// Philox (cpu/sampling_rng.h) so the draws equal the CPU op's.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_context.h"

namespace fp4serve::kernels::cuda {

void sample(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows, const SamplingConfig& config,
            std::span<SampleResult> out);

// Backend::sample_async / wait_sample: the same kernels, then the results copied into pinned host
// memory behind an event (no stream synchronize); finish() waits for that event alone and unpacks.
// One call outstanding at a time; its packed call and host memory are its own, so synchronous
// sample() calls (the fork children's first tokens) may run in between.
class AsyncSampling {
 public:
  AsyncSampling();
  ~AsyncSampling();
  AsyncSampling(const AsyncSampling&) = delete;
  AsyncSampling& operator=(const AsyncSampling&) = delete;

  // Enqueues the op on ctx.stream and returns its ticket. Throws if one is outstanding.
  uint64_t launch(CudaContext& ctx, const TensorView& logits, std::span<const SampleRow> rows,
                  const SamplingConfig& config, std::span<SampleResult> out);
  // Waits for the launch with this ticket and writes its results. Throws for another ticket.
  void finish(CudaContext& ctx, uint64_t ticket);

 private:
  struct State;  // the packed call, the pinned landing place, the event (sampling_cuda.cu)
  std::unique_ptr<State> state_;
};

}  // namespace fp4serve::kernels::cuda
