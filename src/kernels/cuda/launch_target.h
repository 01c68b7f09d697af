// Where a launcher enqueues its kernels: a stream and, from an op, the context's step-graph recorder
// (graph_launch.cuh's launch_kernel checks every launch against a captured step through it). A bare
// stream (the MoE launchers' unit tests) launches eagerly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/graph_recorder.h"

namespace fp4serve::kernels::cuda {

struct LaunchTarget {
  cudaStream_t stream = nullptr;
  GraphRecorder* graph = nullptr;
  LaunchTarget(cudaStream_t s) : stream(s) {}                                  // NOLINT: a stream is a target
  LaunchTarget(std::nullptr_t) {}                                               // NOLINT: the default stream
  LaunchTarget(CudaContext& ctx) : stream(ctx.stream), graph(&ctx.graph) {}  // NOLINT: an op's context
};

}  // namespace fp4serve::kernels::cuda
