// Parallel loops for the CPU kernels (OpenMP underneath, static schedules only).
//
// Invariance rule for every kernel: work is split over OUTPUT elements (rows, columns, heads),
// never over a reduction dimension, and each output is computed by exactly one thread with a
// summation order that depends only on the problem shape. So results are bit-identical for any
// thread count; the split below only decides who computes what, never how.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace fp4serve::kernels::cpu {

// Threads used by parallel_for. Default: all logical cores (or OMP_NUM_THREADS if set).
int num_threads();
// n <= 0 restores the default.
void set_num_threads(int n);

// A non-owning reference to a callable (what std::function_ref is in C++26): parallel_for calls the
// caller's lambda while the caller waits, so nothing is copied and nothing allocated -- a
// std::function holding a lambda with more than two captures would heap-allocate on every call.
class RangeFn {
 public:
  template <class F, class = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(F&& f)  // NOLINT: implicit, lambdas are passed directly
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, int64_t b, int64_t e) { (*static_cast<std::remove_reference_t<F>*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(object_, b, e); }

 private:
  void* object_;
  void (*call_)(void*, int64_t, int64_t);
};

// Calls fn(begin, end) on disjoint contiguous ranges covering [0, n), in parallel. Ranges are at
// least `grain` long (except the last). Runs inline when one range suffices or when called from
// inside another parallel_for.
void parallel_for(int64_t n, int64_t grain, RangeFn fn);

}  // namespace fp4serve::kernels::cpu
