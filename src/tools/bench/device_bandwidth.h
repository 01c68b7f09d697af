// The bandwidth `fp4serve bench model` quotes decode efficiency against when the model runs on a
// CUDA device: the device's own copy bandwidth, measured in the run that quotes it (a 1 GiB
// cudaMemcpy device to device, bytes read + written, median of 10 timed copies with CUDA events:
// bench/cuda_ops_bench.cpp's figure), not the host's read bandwidth.
#pragma once

#include <optional>

#include "kernels/backend.h"

namespace fp4serve::tools::bench {

// The copy bandwidth of `backend`'s device in GB/s (1e9); nullopt for a backend that is not CUDA
// or in a CPU-only build. Throws std::runtime_error naming the CUDA call that failed.
std::optional<double> measure_device_copy_gbs(kernels::Backend& backend);

}  // namespace fp4serve::tools::bench
