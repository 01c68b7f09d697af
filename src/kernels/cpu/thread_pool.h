// Parallel loops for the CPU kernels (OpenMP underneath, static schedules only).
//
// Invariance rule for every kernel: work is split over OUTPUT elements (rows, columns, heads),
// never over a reduction dimension, and each output is computed by exactly one thread with a
// summation order that depends only on the problem shape. So results are bit-identical for any
// thread count; the split below only decides who computes what, never how.
#pragma once

#include <cstdint>
#include <functional>

namespace fp4serve::kernels::cpu {

// Threads used by parallel_for. Default: all logical cores (or OMP_NUM_THREADS if set).
int num_threads();
// n <= 0 restores the default.
void set_num_threads(int n);

// Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), in parallel. Ranges are at
// least `grain` long (except the last). Runs inline when one range suffices or when called from
// inside another parallel_for.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace fp4serve::kernels::cpu
